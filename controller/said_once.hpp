#pragma once
// Say-once bookkeeping: a condition the controller meets at every look (a
// call that keeps failing, a file with the same error) is logged and
// recorded once, and again only when what is said about it changes.

#include <cstddef>
#include <map>
#include <string>

namespace ar {

class SaidOnce {
 public:
  // At most `bound` keys are kept: past it, all are forgotten (a key whose
  // condition never ends is then said again, at worst).
  explicit SaidOnce(std::size_t bound = 100'000) : bound_(bound) {}

  // True, and `text` remembered, if `text` is not what was last said under
  // `key` (or nothing was): the caller says it now.
  bool say(const std::string& key, const std::string& text = {}) {
    if (said_.size() >= bound_ && !said_.contains(key)) said_.clear();
    auto [it, added] = said_.try_emplace(key, text);
    if (added) return true;
    if (it->second == text) return false;
    it->second = text;
    return true;
  }
  // Whether something is said under `key`.
  bool said(const std::string& key) const { return said_.contains(key); }
  std::size_t size() const { return said_.size(); }
  // Forgets `key` (the condition is over): its next say is new. True if
  // something was said under it.
  bool forget(const std::string& key) { return said_.erase(key) > 0; }
  // Forgets every key for which `done(key)` holds.
  template <class Done>
  void forget_if(Done done) {
    std::erase_if(said_, [&](const auto& entry) { return done(entry.first); });
  }
  void clear() { said_.clear(); }

 private:
  std::size_t bound_;
  std::map<std::string, std::string> said_;
};

}  // namespace ar
