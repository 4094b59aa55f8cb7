/*
 * workqueue_wakeup.pml - the park/wake protocol of uvhost::sync::WorkQueue.
 *
 * Property checked: NO LOST WAKE-UP. Whenever the system can make no more
 * progress (Promela `timeout`: every process blocked or finished) no work item
 * is still queued; and after stop() the worker has exited. A lost wake-up
 * leaves an item queued with the worker asleep in futex_wait forever, which
 * the assertions in stopper (before stop) and watchdog (after) report.
 *
 * What is modelled (see sync/include/uvhost/sync/work_queue.h):
 *  - NPROD producers, each queueing item (p % NITEMS) ROUNDS times; producers
 *    share items, so the "already queued" path is exercised. EVERY queue()
 *    picks its strategy nondeterministically, which covers live switching:
 *      (a) lock; test-and-set queued bit; append; wake_if_parked; unlock
 *      (b) lock; test-and-set queued bit; append; unlock; wake_if_parked
 *      (c) test-and-set queued bit; push on the lock-free list; wake_if_parked
 *  - wake_if_parked: load state; if PARKED, CAS PARKED->RUNNING and the
 *    winner calls futex_wake (two separate steps, as in the code).
 *  - the worker: take the FIFO list under the lock and the lock-free list
 *    with one exchange, clear each item's bit and "run" it; when nothing ran:
 *    exit if stop was requested and nothing is pending; otherwise store
 *    PARKED, re-check both lists (the FIFO one under the lock), and
 *    futex_wait(state, PARKED) - which sleeps only if state is still PARKED.
 *  - stop(): after every producer has finished (the contract forbids racing
 *    queue() with stop()), set stop_requested and wake_if_parked.
 * Memory model: Promela interleaves atomic steps (sequential consistency).
 * The C++ code gets that ordering where it matters - the Dekker pair
 * "publish item / load state" vs "store PARKED / check lists" - from seq_cst
 * operations on both sides (or the list lock, for the FIFO list); everything
 * else is ordered by the lock or by RMWs on a single word.
 *
 * Deliberately buggy variants (compile with spin -D...), which the checker
 * must reject:
 *  - BUG_CHECK_BEFORE_ANNOUNCE: the worker checks the lists and only then
 *    announces PARKED (the 2023 vhost_worker missed-wake-up class of bug).
 *  - BUG_WAKE_BEFORE_PUBLISH: producers test for a parked worker before
 *    making their item visible.
 *
 * Run: sync/models/check_workqueue_model.sh (ctest: workqueue_model).
 */

#ifndef NPROD
#define NPROD 3
#endif
#ifndef NITEMS
#define NITEMS 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#define QCAP (NPROD * ROUNDS)

#define RUNNING 0
#define PARKED  1

bit  queued[NITEMS];          /* WorkItem::queued_ */
chan fifo = [QCAP] of { byte }; /* (a)/(b) list, guarded by fifo_lock */
chan lifo = [QCAP] of { byte }; /* (c) lock-free list; its order does not matter here */
bit  fifo_lock;
byte state = RUNNING;          /* WorkQueue::state_, the futex word */
bit  asleep;                   /* the worker is inside futex_wait */
bit  stop_requested;
bit  worker_exited;
byte producers_done;

inline lock()   { atomic { fifo_lock == 0 -> fifo_lock = 1 } }
inline unlock() { fifo_lock = 0 }

/* if (state == PARKED (seq_cst load) && CAS(state, PARKED, RUNNING)) futex_wake(state) */
inline wake_if_parked() {
  if
  :: state == PARKED ->
       atomic {
         if
         :: state == PARKED -> state = RUNNING; won = 1
         :: else -> won = 0
         fi
       };
       if
       :: won == 1 -> asleep = 0   /* futex_wake: a no-op if nobody sleeps */
       :: else -> skip
       fi
  :: else -> skip
  fi
}

/* queued_.exchange(true): ok == 1 when this call queued the item */
inline test_and_set(item) {
  atomic { ok = 1 - queued[item]; queued[item] = 1 }
}

proctype producer(byte item) {
  byte round = 0;
  bit ok;
  bit won;
  do
  :: round < ROUNDS ->
     if
     :: /* (a) kLockedWake */
        lock();
        test_and_set(item);
        if
        :: ok == 1 -> fifo!item; wake_if_parked()
        :: else -> skip
        fi;
        unlock()
     :: /* (b) kUnlockThenWake */
        lock();
        test_and_set(item);
        if
        :: ok == 1 -> fifo!item; unlock(); wake_if_parked()
        :: else -> unlock()
        fi
     :: /* (c) kLockless */
        test_and_set(item);
        if
        :: ok == 1 ->
#ifdef BUG_WAKE_BEFORE_PUBLISH
           wake_if_parked(); lifo!item
#else
           lifo!item; wake_if_parked()
#endif
        :: else -> skip
        fi
     fi;
     round++
  :: else -> break
  od;
  producers_done++
}

/* pending = either list non-empty (the FIFO one read under its lock) */
inline check_pending() {
  pending = (len(lifo) > 0);
  lock();
  pending = pending || (len(fifo) > 0);
  unlock()
}

/* while (state == PARKED) futex_wait(state, PARKED); */
inline futex_wait_loop() {
  do
  :: state == PARKED ->
       atomic {
         if
         :: state == PARKED -> asleep = 1   /* the kernel's compare-and-sleep */
         :: else -> skip
         fi
       };
end_parked:
       asleep == 0
  :: else -> break
  od
}

active proctype worker() {
  chan batch = [QCAP] of { byte };
  byte id;
  bit ran;
  bit pending;
  do
  :: /* drain_once(): take both lists, then run the batch */
     lock();
     do
     :: len(fifo) > 0 -> fifo?id; batch!id
     :: else -> break
     od;
     unlock();
     atomic {  /* lockless_head_.exchange(nullptr) */
       do
       :: len(lifo) > 0 -> lifo?id; batch!id
       :: else -> break
       od
     };
     ran = (len(batch) > 0);
     do
     :: len(batch) > 0 -> batch?id; queued[id] = 0   /* clear the bit, then run fn */
     :: else -> break
     od;
     if
     :: ran == 1 -> skip
     :: else ->
        /* read stop_requested FIRST, then the lists: items queued before stop()
           are then certainly seen (checking the lists first loses them - the
           checker found that ordering mistake in an earlier draft of this model) */
        if
        :: stop_requested == 1 ->
           check_pending();
           if
           :: pending == 0 -> break
           :: else -> skip
           fi
        :: else -> skip
        fi;
#ifdef BUG_CHECK_BEFORE_ANNOUNCE
        /* BUG: look for work first, announce the sleep afterwards */
        check_pending();
        if
        :: pending == 1 || stop_requested == 1 -> skip
        :: else -> state = PARKED; futex_wait_loop()
        fi
#else
        state = PARKED;          /* seq_cst store */
        check_pending();
        if
        :: pending == 1 || stop_requested == 1 -> state = RUNNING
        :: else -> futex_wait_loop()
        fi
#endif
     fi
  od;
  worker_exited = 1
}

/* stop(), in one of two modes chosen nondeterministically (both are explored):
   EARLY: as soon as every producer has finished, racing with the worker's drain
          (stop() never races with queue(): the contract forbids it);
   QUIET: only once the system is quiescent, after asserting that nothing is
          left queued. This mode is what catches a lost wake-up of an ITEM:
          without it, stop()'s own wake-up would rescue the stuck item. */
active proctype stopper() {
  bit won;
  bit quiet;
  byte i = 0;
  /* Choose the mode first: a `timeout` guard next to an executable one would
     never be taken. */
  if
  :: quiet = 0
  :: quiet = 1
  fi;
  if
  :: quiet == 0 -> producers_done == NPROD          /* EARLY */
  :: quiet == 1 -> timeout ->                       /* QUIET */
     do
     :: i < NITEMS -> assert(queued[i] == 0); i++   /* no item queued with the worker asleep */
     :: else -> break
     od
  fi;
  stop_requested = 1;
  wake_if_parked()
}

init {
  byte p = 0;
  atomic {
    do
    :: p < NPROD -> run producer(p % NITEMS); p++
    :: else -> break
    od
  }
}

/* After stop(): at quiescence nothing may be left queued and the worker must have exited. */
active proctype watchdog() {
  byte i = 0;
  stop_requested == 1;
  timeout ->
  do
  :: i < NITEMS -> assert(queued[i] == 0); i++
  :: else -> break
  od;
  assert(worker_exited == 1)
}
