/* ck_locks.h - the C entry points over Concurrency Kit's ticket, MCS and CLH
 * spinlocks (sync/src/ck_locks.c) and the storage the C++ wrappers in
 * uvhost/sync/baseline_locks.h reserve for them; one declaration for both languages.
 *
 * Storage is opaque on the C++ side: a lock takes UVHOST_CK_LOCK_STORAGE bytes aligned
 * to UVHOST_CK_LOCK_ALIGN (the ticket word, or the MCS/CLH queue tail pointer), an MCS
 * queue node UVHOST_CK_NODE_STORAGE bytes aligned to UVHOST_CK_NODE_ALIGN (one cache
 * line). ck_locks.c static_asserts that CK's types fit.
 */
#pragma once

#define UVHOST_CK_LOCK_STORAGE 8
#define UVHOST_CK_LOCK_ALIGN 8
#define UVHOST_CK_NODE_STORAGE 64
#define UVHOST_CK_NODE_ALIGN 64

#ifdef __cplusplus
extern "C" {
#else
#include <stdbool.h>
#endif

void uvhost_ck_ticket_init(void* lock);
void uvhost_ck_ticket_lock(void* lock);
bool uvhost_ck_ticket_trylock(void* lock);
void uvhost_ck_ticket_unlock(void* lock);
bool uvhost_ck_ticket_locked(void* lock);
void uvhost_ck_mcs_init(void* lock);
void uvhost_ck_mcs_lock(void* lock, void* node);
bool uvhost_ck_mcs_trylock(void* lock, void* node);
void uvhost_ck_mcs_unlock(void* lock, void* node);
bool uvhost_ck_mcs_locked(void* lock);
void* uvhost_ck_clh_node_alloc(void);
void uvhost_ck_clh_node_free(void* node);
void uvhost_ck_clh_init(void* lock, void* unowned_node);
void uvhost_ck_clh_lock(void* lock, void* node);
void uvhost_ck_clh_unlock(void** thread_node);
bool uvhost_ck_clh_locked(void* lock);
void* uvhost_ck_clh_tail(void* lock);

#ifdef __cplusplus
}
#endif
