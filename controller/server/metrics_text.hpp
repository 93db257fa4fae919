#pragma once
// Metrics in Prometheus's text exposition format (version 0.0.4):
// counters, gauges and histograms, each a family of series told apart by
// their label values. Families are declared once, up front; a label value
// is whatever the caller passes, so callers pass only values from a small
// fixed set (an op, an outcome, a group): never a job or a node, which
// would make a series per job on a large cluster. Thread-safe: the
// controller's threads count while a scrape renders.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ar::metrics {

enum class Type { counter, gauge, histogram };
// A series' label values, in the order of its family's label names.
using Labels = std::vector<std::string>;

class Registry {
 public:
  // Declares a family. Throws std::logic_error for a name declared already,
  // a name or label name Prometheus does not accept, or histogram bounds
  // that do not rise.
  void counter(const std::string& name, const std::string& help,
               std::vector<std::string> label_names = {});
  void gauge(const std::string& name, const std::string& help,
             std::vector<std::string> label_names = {});
  void histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                 std::vector<std::string> label_names = {});

  // Adds `by` (>= 0) to a counter's series, which starts at 0.
  void add(std::string_view name, const Labels& labels = {}, double by = 1);
  // Sets a gauge's series.
  void set(std::string_view name, const Labels& labels, double value);
  // Forgets every series of a gauge (before setting the current ones, so
  // that a group gone is no longer shown).
  void clear(std::string_view name);
  // Counts `value` into a histogram's series.
  void observe(std::string_view name, const Labels& labels, double value);
  // Makes the series exist (at 0) without counting: a counter shown before
  // its first event, so that rate() sees it start.
  void touch(std::string_view name, const Labels& labels);

  // A counter's or gauge's value, a histogram's count; 0 for a series not
  // seen. For tests and for the controller's own use.
  double value(std::string_view name, const Labels& labels = {}) const;

  // Every family with its HELP and TYPE lines, families by name, series by
  // label values.
  std::string render() const;

  // The misuses above (an undeclared family, the wrong type, a wrong number
  // of labels, a negative add) throw std::logic_error.

 private:
  struct Series {
    double value = 0;                    // a counter's or gauge's
    std::vector<std::uint64_t> buckets;  // a histogram's, per bound (not cumulative)
    double sum = 0;
    std::uint64_t count = 0;
  };
  struct Family {
    Type type = Type::counter;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<double> bounds;  // a histogram's upper bounds, rising, without +Inf
    std::map<Labels, Series> series;
  };
  void declare(const std::string& name, Family family);
  Series& series(std::string_view name, Type type, const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
};

// A label value escaped for the text format (backslash, double quote and
// newline).
std::string escape_label(std::string_view value);
// A sample value as the text format writes it: an integer without a
// fraction, +Inf, -Inf, NaN, else the shortest text that reads back the same.
std::string format_value(double value);

}  // namespace ar::metrics
