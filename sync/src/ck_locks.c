/* ck_locks.c - plain C entry points over Concurrency Kit's ticket, MCS and CLH
 * spinlocks, for the C++ wrappers in uvhost/sync/baseline_locks.h.
 *
 * Why a C file: CK's headers are C, not C++ (ck_pr_fas_ptr returns void*, which C++
 * will not convert implicitly). The C++ side sees only opaque storage of the sizes and
 * alignments checked below, and these functions. No algorithm here is ours: each
 * function is one CK call (plus ThreadSanitizer annotations, see below).
 *
 * ThreadSanitizer: CK implements its atomics with inline assembly, which TSan does not
 * see. The C++ wrappers tell TSan about the lock's happens-before edge (acquire after
 * lock, release before unlock, on the lock's address). Inside the CK calls, CK also
 * reads and writes its own queue nodes with plain accesses ordered only by that
 * assembly (a CLH node migrates from thread to thread); we tell TSan to ignore the
 * memory accesses of the CK call itself, not of the caller's critical section.
 */
#include <ck_spinlock.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>

#include "uvhost/sync/ck_locks.h"

#if defined(UVHOST_SANITIZER_THREAD)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define UVHOST_CK_BEGIN() __tsan_ignore_thread_begin()
#define UVHOST_CK_END() __tsan_ignore_thread_end()
#else
#define UVHOST_CK_BEGIN() ((void)0)
#define UVHOST_CK_END() ((void)0)
#endif

/* The storage the C++ side reserves (UVHOST_CK_*) must hold CK's types. */
_Static_assert(sizeof(ck_spinlock_ticket_t) <= UVHOST_CK_LOCK_STORAGE, "ticket storage");
_Static_assert(alignof(ck_spinlock_ticket_t) <= UVHOST_CK_LOCK_ALIGN, "ticket alignment");
_Static_assert(sizeof(ck_spinlock_mcs_t) <= UVHOST_CK_LOCK_STORAGE, "mcs storage");
_Static_assert(alignof(ck_spinlock_mcs_t) <= UVHOST_CK_LOCK_ALIGN, "mcs alignment");
_Static_assert(sizeof(ck_spinlock_mcs_context_t) <= UVHOST_CK_NODE_STORAGE, "mcs node storage");
_Static_assert(alignof(ck_spinlock_mcs_context_t) <= UVHOST_CK_NODE_ALIGN, "mcs node alignment");
_Static_assert(sizeof(struct ck_spinlock_clh *) <= UVHOST_CK_LOCK_STORAGE, "clh storage");
_Static_assert(alignof(struct ck_spinlock_clh *) <= UVHOST_CK_LOCK_ALIGN, "clh alignment");

/* ---- ticket ---- */
void uvhost_ck_ticket_init(void *lock) { ck_spinlock_ticket_init(lock); }

void uvhost_ck_ticket_lock(void *lock) {
  UVHOST_CK_BEGIN();
  ck_spinlock_ticket_lock(lock);
  UVHOST_CK_END();
}

bool uvhost_ck_ticket_trylock(void *lock) {
  UVHOST_CK_BEGIN();
  bool acquired = ck_spinlock_ticket_trylock(lock);
  UVHOST_CK_END();
  return acquired;
}

void uvhost_ck_ticket_unlock(void *lock) {
  UVHOST_CK_BEGIN();
  ck_spinlock_ticket_unlock(lock);
  UVHOST_CK_END();
}

bool uvhost_ck_ticket_locked(void *lock) {
  UVHOST_CK_BEGIN();
  bool locked = ck_spinlock_ticket_locked(lock);
  UVHOST_CK_END();
  return locked;
}

/* ---- MCS: the lock is the queue tail pointer; the node is the caller's ---- */
void uvhost_ck_mcs_init(void *lock) { ck_spinlock_mcs_init(lock); }

void uvhost_ck_mcs_lock(void *lock, void *node) {
  UVHOST_CK_BEGIN();
  ck_spinlock_mcs_lock(lock, node);
  UVHOST_CK_END();
}

bool uvhost_ck_mcs_trylock(void *lock, void *node) {
  UVHOST_CK_BEGIN();
  bool acquired = ck_spinlock_mcs_trylock(lock, node);
  UVHOST_CK_END();
  return acquired;
}

void uvhost_ck_mcs_unlock(void *lock, void *node) {
  UVHOST_CK_BEGIN();
  ck_spinlock_mcs_unlock(lock, node);
  UVHOST_CK_END();
}

bool uvhost_ck_mcs_locked(void *lock) {
  UVHOST_CK_BEGIN();
  bool locked = ck_spinlock_mcs_locked(lock);
  UVHOST_CK_END();
  return locked;
}

/* ---- CLH: the lock is the queue tail pointer; nodes migrate between threads ---- */
void *uvhost_ck_clh_node_alloc(void) {
  /* One cache line: a waiter spins on its predecessor's node only. */
  void *node = aligned_alloc(UVHOST_CK_NODE_ALIGN, UVHOST_CK_NODE_STORAGE);
  if (node == NULL) abort();
  return node;
}

void uvhost_ck_clh_node_free(void *node) { free(node); }

void uvhost_ck_clh_init(void *lock, void *unowned_node) { ck_spinlock_clh_init(lock, unowned_node); }

void uvhost_ck_clh_lock(void *lock, void *node) {
  UVHOST_CK_BEGIN();
  ck_spinlock_clh_lock(lock, node);
  UVHOST_CK_END();
}

/* CK replaces *thread_node with the predecessor's node, which the thread now owns. */
void uvhost_ck_clh_unlock(void **thread_node) {
  UVHOST_CK_BEGIN();
  ck_spinlock_clh_unlock((struct ck_spinlock_clh **)thread_node);
  UVHOST_CK_END();
}

bool uvhost_ck_clh_locked(void *lock) {
  UVHOST_CK_BEGIN();
  bool locked = ck_spinlock_clh_locked(lock);
  UVHOST_CK_END();
  return locked;
}

/* The node at the tail of the queue; owned by the lock while it is unlocked. */
void *uvhost_ck_clh_tail(void *lock) {
  UVHOST_CK_BEGIN();
  void *tail = ck_pr_load_ptr((struct ck_spinlock_clh **)lock);
  UVHOST_CK_END();
  return tail;
}
