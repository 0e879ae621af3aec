/* The tiers a file can be held in, one enum for every layer: the plan
 * assigns a tier to each file, the cache holds entries in one, the model
 * prices reading a peer's tier.  RAM and SSD index per-tier arrays
 * ([CFS_TIER_COUNT]); CFS_TIER_NONE, "held by no tier" (fetched from a peer
 * or the PFS when needed), comes after them so that such arrays need no
 * slot for it, and arrays that count it too have CFS_TIER_COUNT + 1 slots. */
#ifndef CLAIRFS_TIER_H
#define CLAIRFS_TIER_H

enum cfs_tier {
    CFS_TIER_RAM = 0,
    CFS_TIER_SSD = 1,
    CFS_TIER_NONE = 2,
};
#define CFS_TIER_COUNT 2 /* tiers that hold data */

#endif
