// A value or a positive errno, the way libibverbs reports failure (errno,
// never an exception: DESIGN.md forbids exceptions in transport/).
#pragma once

#include <optional>
#include <utility>

namespace isoroce::verbs {

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)), err_(0) {}  // NOLINT: implicit on purpose
  static Result error(int err) { return Result(err, 0); }

  bool ok() const { return err_ == 0; }
  int err() const { return err_; }
  const T& value() const { return *value_; }
  T& value() { return *value_; }

 private:
  Result(int err, int) : err_(err) {}
  std::optional<T> value_;
  int err_;
};

}  // namespace isoroce::verbs
