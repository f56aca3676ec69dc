// TlsfHeap: the TLSF algorithm over pools of address space, with no device in sight (the
// policy in tlsf.cpp gets the pools from the device and decides when to give them back).
//
// Structure (Masmano et al., ECRTS 2004, §4):
//  - every pool is a chain of blocks in address order (physical neighbours, the paper's
//    boundary tags), each either free or used; blocks never cross a pool's edge;
//  - free blocks sit in one doubly linked list per size class (size_classes.hpp), new ones
//    pushed at the head; a first-level bitmap says which fl have any free block, one
//    second-level bitmap per fl says which of its sl lists are non-empty;
//  - allocate: look up the request's good-fit class, find the first non-empty list at or above
//    it with two bit scans, take that list's head and split off the rest as a new free block;
//  - free: merge at once with a free previous and a free next physical neighbour.
//
// Invariants:
//  - no two physically adjacent blocks are both free (merging is immediate);
//  - a free block is in exactly the list of class_of(its size), and a list's bit is set iff the
//    list is non-empty;
//  - a block's record index never changes while the block lives: a split keeps the low part in
//    the old record, a merge keeps the lower block's record, so a pool's first block keeps the
//    index add_pool returned;
//  - record slots of merged-away blocks are reused last-freed first (deterministic).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "fraglab/policy_kit.hpp"
#include "tlsf/size_classes.hpp"

namespace fraglab::tlsf {

class TlsfHeap {
 public:
  using Index = std::uint32_t;
  static constexpr Index kNil = UINT32_MAX;

  struct BlockRecord {
    Addr addr = 0;
    Bytes size = 0;
    Index prev_phys = kNil;  // physical neighbours inside the pool
    Index next_phys = kNil;
    Index prev_free = kNil;  // links of the class's free list (free blocks only)
    Index next_free = kNil;
    bool free = false;
  };

  explicit TlsfHeap(unsigned sl_bits);

  // Adds [base, base + size) as a pool holding one free block; returns that block.
  Index add_pool(Addr base, Bytes size);
  // Good fit: a free block found from the request's rounded-up class, split to `size`.
  // kNil when no list at or above that class has a block.
  Index allocate(Bytes size);
  // Takes `size` bytes from the low end of the free block `index` (which must hold them),
  // splitting the rest off as a free block. Returns `index`.
  Index take(Index index, Bytes size);
  // Frees a used block and merges it with free physical neighbours.
  void free(Index index);
  // The pools that are one free block, by base (the ones the policy may give back).
  std::vector<Addr> wholly_free_pools() const;
  // Forgets a wholly free pool.
  void remove_pool(Addr base);

  const BlockRecord& block(Index index) const { return blocks_[index]; }
  // Pools by base: size and the index of the first block.
  struct Pool {
    Bytes size = 0;
    Index first = kNil;
  };
  const std::map<Addr, Pool>& pools() const { return pools_; }
  unsigned sl_bits() const { return sl_bits_; }
  Bytes free_bytes() const { return free_bytes_; }
  std::uint64_t free_blocks() const { return free_blocks_; }
  std::uint64_t splits() const { return splits_; }
  std::uint64_t merges() const { return merges_; }
  Bytes largest_free_block() const;
  // Checks the invariants above from scratch (chains tile their pools, lists match classes and
  // bitmaps, counters match blocks); the walks are bounded, so a corrupt link cannot hang it.
  void audit(kit::AuditLog& log) const;

 private:
  Index find_suitable(SizeClass c) const;
  void insert_free(Index index);
  void remove_free(Index index);
  Index new_record();
  void drop_record(Index index);
  void absorb_next(Index left);
  std::size_t list_of(SizeClass c) const { return (std::size_t{c.fl} << sl_bits_) + c.sl; }

  const unsigned sl_bits_;
  std::vector<BlockRecord> blocks_;
  std::vector<Index> spare_records_;  // reused last-in first-out
  std::vector<Index> heads_;          // [fl << sl_bits | sl] -> first free block
  std::uint64_t fl_bitmap_ = 0;
  std::array<std::uint64_t, kFirstLevels> sl_bitmap_{};
  std::map<Addr, Pool> pools_;
  Bytes free_bytes_ = 0;
  std::uint64_t free_blocks_ = 0;
  std::uint64_t splits_ = 0;
  std::uint64_t merges_ = 0;
};

}  // namespace fraglab::tlsf
