#include "server/metrics_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace ar::metrics {

namespace {

bool name_ok(std::string_view name, bool colon) {
  if (name.empty()) return false;
  const auto allowed = [colon](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
  };
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!allowed(name[i], i == 0)) return false;
  return true;
}

const char* type_name(Type type) {
  switch (type) {
    case Type::counter:
      return "counter";
    case Type::gauge:
      return "gauge";
    case Type::histogram:
      return "histogram";
  }
  return "untyped";
}

// Backslash and newline escaped, and the double quote too with `quote`
// (a label value's; HELP text keeps its quotes).
std::string escaped(std::string_view text, bool quote) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || (quote && c == '"'))
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string label_text(const std::vector<std::string>& names, const Labels& values,
                       std::string_view extra_name = {}, std::string_view extra_value = {}) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + escape_label(values[i]) + "\"";
  if (!extra_name.empty())
    out += (out.empty() ? "" : ",") + std::string(extra_name) + "=\"" + std::string(extra_value) +
           "\"";
  return out.empty() ? out : "{" + out + "}";
}

}  // namespace

std::string escape_label(std::string_view value) { return escaped(value, true); }

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0)
    return std::to_string(static_cast<std::int64_t>(value));
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

void Registry::declare(const std::string& name, Family family) {
  if (!name_ok(name, true)) throw std::logic_error("bad metric name '" + name + "'");
  for (const auto& label : family.label_names)
    if (!name_ok(label, false) || label.starts_with("__") ||
        (family.type == Type::histogram && label == "le"))
      throw std::logic_error("metric " + name + ": bad label name '" + label + "'");
  if (!std::is_sorted(family.bounds.begin(), family.bounds.end()) ||
      std::adjacent_find(family.bounds.begin(), family.bounds.end()) != family.bounds.end() ||
      std::any_of(family.bounds.begin(), family.bounds.end(),
                  [](double b) { return !std::isfinite(b); }))
    throw std::logic_error("metric " + name + ": histogram bounds must rise and be finite");
  std::lock_guard lock(mutex_);
  if (families_.contains(name)) throw std::logic_error("metric " + name + " declared twice");
  // A family without labels has its one series from the start.
  if (family.label_names.empty()) family.series[{}].buckets.assign(family.bounds.size(), 0);
  families_.emplace(name, std::move(family));
}

void Registry::counter(const std::string& name, const std::string& help,
                       std::vector<std::string> label_names) {
  declare(name, {Type::counter, help, std::move(label_names), {}, {}});
}

void Registry::gauge(const std::string& name, const std::string& help,
                     std::vector<std::string> label_names) {
  declare(name, {Type::gauge, help, std::move(label_names), {}, {}});
}

void Registry::histogram(const std::string& name, const std::string& help,
                         std::vector<double> bounds, std::vector<std::string> label_names) {
  declare(name, {Type::histogram, help, std::move(label_names), std::move(bounds), {}});
}

Registry::Series& Registry::series(std::string_view name, Type type, const Labels& labels) {
  const auto found = families_.find(name);
  if (found == families_.end())
    throw std::logic_error("metric " + std::string(name) + " is not declared");
  auto& family = found->second;
  if (family.type != type)
    throw std::logic_error("metric " + std::string(name) + " is a " + type_name(family.type) +
                           ", not a " + type_name(type));
  if (labels.size() != family.label_names.size())
    throw std::logic_error("metric " + std::string(name) + " takes " +
                           std::to_string(family.label_names.size()) + " labels, not " +
                           std::to_string(labels.size()));
  auto& s = family.series[labels];
  if (s.buckets.size() != family.bounds.size()) s.buckets.assign(family.bounds.size(), 0);
  return s;
}

void Registry::add(std::string_view name, const Labels& labels, double by) {
  if (!(by >= 0)) throw std::logic_error("metric " + std::string(name) + ": a counter only grows");
  std::lock_guard lock(mutex_);
  series(name, Type::counter, labels).value += by;
}

void Registry::set(std::string_view name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  series(name, Type::gauge, labels).value = value;
}

void Registry::clear(std::string_view name) {
  std::lock_guard lock(mutex_);
  const auto found = families_.find(name);
  if (found == families_.end() || found->second.type != Type::gauge)
    throw std::logic_error("metric " + std::string(name) + " is no gauge declared");
  if (!found->second.label_names.empty()) found->second.series.clear();
}

void Registry::observe(std::string_view name, const Labels& labels, double value) {
  if (!std::isfinite(value)) return;  // nothing to count
  std::lock_guard lock(mutex_);
  auto& s = series(name, Type::histogram, labels);
  const auto& bounds = families_.find(name)->second.bounds;
  // A bucket counts the values up to its bound, the bound included.
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value);
  if (at != bounds.end()) ++s.buckets[static_cast<std::size_t>(at - bounds.begin())];
  s.sum += value;
  ++s.count;
}

void Registry::touch(std::string_view name, const Labels& labels) {
  std::lock_guard lock(mutex_);
  const auto found = families_.find(name);
  if (found == families_.end())
    throw std::logic_error("metric " + std::string(name) + " is not declared");
  series(name, found->second.type, labels);
}

double Registry::value(std::string_view name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  const auto found = families_.find(name);
  if (found == families_.end()) return 0;
  const auto s = found->second.series.find(labels);
  if (s == found->second.series.end()) return 0;
  return found->second.type == Type::histogram ? static_cast<double>(s->second.count)
                                               : s->second.value;
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + escaped(family.help, false) + "\n";
    out += "# TYPE " + name + " " + type_name(family.type) + "\n";
    for (const auto& [labels, s] : family.series) {
      if (family.type != Type::histogram) {
        out += name + label_text(family.label_names, labels) + " " + format_value(s.value) + "\n";
        continue;
      }
      std::uint64_t below = 0;
      for (std::size_t i = 0; i < family.bounds.size(); ++i) {
        below += s.buckets[i];
        out += name + "_bucket" +
               label_text(family.label_names, labels, "le", format_value(family.bounds[i])) + " " +
               std::to_string(below) + "\n";
      }
      out += name + "_bucket" + label_text(family.label_names, labels, "le", "+Inf") + " " +
             std::to_string(s.count) + "\n";
      out +=
          name + "_sum" + label_text(family.label_names, labels) + " " + format_value(s.sum) + "\n";
      out += name + "_count" + label_text(family.label_names, labels) + " " +
             std::to_string(s.count) + "\n";
    }
  }
  return out;
}

}  // namespace ar::metrics
