#include "kiln/primitives/sort.h"

namespace kiln {

bool Sort::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Sort*>(&other);
  return o && o->axis_ == axis_;
}

bool ArgSort::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ArgSort*>(&other);
  return o && o->axis_ == axis_;
}

bool Partition::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Partition*>(&other);
  return o && o->kth_ == kth_ && o->axis_ == axis_;
}

bool ArgPartition::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ArgPartition*>(&other);
  return o && o->kth_ == kth_ && o->axis_ == axis_;
}

} // namespace kiln
