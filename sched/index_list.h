// Intrusive lists of QP indices. The links live in the QP's own state (members next_
// and prev_), so a list head is 4 or 8 bytes and no node is ever allocated.
//   IndexList   doubly linked FIFO: O(1) removal (round-robin rings)
//   IndexStack  singly linked LIFO: push and pop touch only the QP itself (fine wheel slots)
//   IndexRing   singly linked circular FIFO, one index per list
//   IndexQueue  singly linked FIFO with head and tail (calendar buckets)
// Removal from the singly linked ones walks the list: only control operations
// (deactivate, a QP switching between limited and unlimited) do it.
#pragma once

#include <cstdint>

namespace isoroce::sched {

inline constexpr std::uint32_t kNil = 0xffff'ffff;

struct IndexList {
  std::uint32_t head = kNil;
  std::uint32_t tail = kNil;

  bool empty() const { return head == kNil; }

  template <class Node>
  void push_back(Node* nodes, std::uint32_t i) {
    nodes[i].next_ = kNil;
    nodes[i].prev_ = tail;
    if (tail == kNil) {
      head = i;
    } else {
      nodes[tail].next_ = i;
    }
    tail = i;
  }

  // Removes and returns the first index; kNil if empty.
  template <class Node>
  std::uint32_t pop_front(Node* nodes) {
    const std::uint32_t i = head;
    if (i == kNil) return kNil;
    head = nodes[i].next_;
    if (head == kNil) {
      tail = kNil;
    } else {
      nodes[head].prev_ = kNil;
    }
    return i;
  }

  // Unlinks `i`, which must be on this list.
  template <class Node>
  void remove(Node* nodes, std::uint32_t i) {
    const std::uint32_t next = nodes[i].next_;
    const std::uint32_t prev = nodes[i].prev_;
    if (prev == kNil) {
      head = next;
    } else {
      nodes[prev].next_ = next;
    }
    if (next == kNil) {
      tail = prev;
    } else {
      nodes[next].prev_ = prev;
    }
  }

  // Moves all of `other` to the end of this list, leaving `other` empty.
  template <class Node>
  void append(Node* nodes, IndexList& other) {
    if (other.head == kNil) return;
    if (tail == kNil) {
      head = other.head;
    } else {
      nodes[tail].next_ = other.head;
      nodes[other.head].prev_ = tail;
    }
    tail = other.tail;
    other.head = other.tail = kNil;
  }

  // Moves the whole list out, leaving this one empty.
  IndexList take() {
    IndexList out = *this;
    head = tail = kNil;
    return out;
  }
};

static_assert(sizeof(IndexList) == 8);

// Unlinks `i` from the singly linked list starting at `head`; returns the node before
// it (kNil if it was first).
template <class Node>
std::uint32_t unlink_single(Node* nodes, std::uint32_t& head, std::uint32_t i) {
  if (head == i) {
    head = nodes[i].next_;
    return kNil;
  }
  std::uint32_t p = head;
  while (nodes[p].next_ != i) p = nodes[p].next_;
  nodes[p].next_ = nodes[i].next_;
  return p;
}

struct IndexStack {
  std::uint32_t head = kNil;

  bool empty() const { return head == kNil; }

  template <class Node>
  void push(Node* nodes, std::uint32_t i) {
    nodes[i].next_ = head;
    head = i;
  }

  template <class Node>
  std::uint32_t pop(Node* nodes) {
    const std::uint32_t i = head;
    if (i != kNil) head = nodes[i].next_;
    return i;
  }

  template <class Node>
  void remove(Node* nodes, std::uint32_t i) {
    unlink_single(nodes, head, i);
  }

  IndexStack take() {
    IndexStack out = *this;
    head = kNil;
    return out;
  }
};

// FIFO as a circular singly linked list known by its tail (tail.next is the head),
// so a list head is one index: the calendar of eligible QPs has 4096 of them.
struct IndexRing {
  std::uint32_t tail = kNil;

  bool empty() const { return tail == kNil; }

  template <class Node>
  void push(Node* nodes, std::uint32_t i) {
    if (tail == kNil) {
      nodes[i].next_ = i;
    } else {
      nodes[i].next_ = nodes[tail].next_;
      nodes[tail].next_ = i;
    }
    tail = i;
  }

  template <class Node>
  std::uint32_t pop(Node* nodes) {
    if (tail == kNil) return kNil;
    const std::uint32_t head = nodes[tail].next_;
    if (head == tail) {
      tail = kNil;
    } else {
      nodes[tail].next_ = nodes[head].next_;
    }
    return head;
  }

  template <class Node>
  void remove(Node* nodes, std::uint32_t i) {
    std::uint32_t p = tail;
    while (nodes[p].next_ != i) p = nodes[p].next_;
    if (p == i) {  // the only one
      tail = kNil;
      return;
    }
    nodes[p].next_ = nodes[i].next_;
    if (tail == i) tail = p;
  }

  IndexRing take() {
    IndexRing out = *this;
    tail = kNil;
    return out;
  }
};

// FIFO as a singly linked list with head and tail: push only stores (to the new node
// and to the old tail's link, both lines just used), pop loads only the node it
// returns. The calendar of eligible QPs uses it: a circular list (IndexRing) needs
// the tail's line loaded before every push and pop.
struct IndexQueue {
  std::uint32_t head = kNil;
  std::uint32_t tail = kNil;

  bool empty() const { return head == kNil; }

  template <class Node>
  void push(Node* nodes, std::uint32_t i) {
    nodes[i].next_ = kNil;
    if (head == kNil) {
      head = i;
    } else {
      nodes[tail].next_ = i;
    }
    tail = i;
  }

  template <class Node>
  std::uint32_t pop(Node* nodes) {
    const std::uint32_t i = head;
    if (i == kNil) return kNil;
    head = nodes[i].next_;
    return i;  // tail is stale once head is kNil; push() looks at head only
  }

  template <class Node>
  void remove(Node* nodes, std::uint32_t i) {
    const std::uint32_t prev = unlink_single(nodes, head, i);
    if (tail == i) tail = prev;
  }

  IndexQueue take() {
    IndexQueue out = *this;
    head = tail = kNil;
    return out;
  }
};

static_assert(sizeof(IndexStack) == 4);
static_assert(sizeof(IndexQueue) == 8);
static_assert(sizeof(IndexRing) == 4);

}  // namespace isoroce::sched
