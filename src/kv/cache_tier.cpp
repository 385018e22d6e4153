#include "kv/cache_tier.h"

namespace flashkv {

const char* CacheSourceName(CacheSource source) {
  switch (source) {
    case CacheSource::kNone:
      return "none";
    case CacheSource::kLive:
      return "live";
    case CacheSource::kRam:
      return "ram";
    case CacheSource::kDisk:
      return "disk";
    case CacheSource::kRemote:
      return "remote";
  }
  return "none";
}

int CacheTierNumber(CacheSource source) {
  switch (source) {
    case CacheSource::kLive:
      return 1;
    case CacheSource::kRam:
      return 2;
    case CacheSource::kDisk:
      return 3;
    case CacheSource::kRemote:
      return 4;
    case CacheSource::kNone:
      break;
  }
  return 5;
}

std::vector<CacheTier*> ResumeOrder(CacheTier* ram, CacheTier* disk, CacheTier* remote) {
  std::vector<CacheTier*> order;
  for (CacheTier* tier : {ram, disk, remote}) {
    if (tier != nullptr) order.push_back(tier);
  }
  return order;
}

}  // namespace flashkv
