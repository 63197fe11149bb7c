/* Named constants of the echelon data plane. Every number here is part of
 * the wire or control-plane contract documented in docs/wire-format.md and
 * docs/pipeline.md; change them only together with those documents. */
#ifndef _ECHELON_CONSTANTS_P4_
#define _ECHELON_CONSTANTS_P4_

const bit<16> ETHERTYPE_IPV4     = 0x0800;
const bit<8>  IPPROTO_UDP        = 17;
/* IPv4 header length in 32-bit words without options. */
const bit<4>  IPV4_IHL_MIN       = 5;
/* UDP destination port that marks an echelon header (0xEC00). */
const bit<16> ECHELON_UDP_PORT   = 0xEC00;
/* The only header version this program understands. */
const bit<4>  ECHELON_VERSION    = 1;

/* Strict-priority levels, simple_switch meaning: 7 is served first, 0 last.
 * Invariant: the program never writes a priority above PRIO_MAX, so a switch
 * started with --priority-queues 8 never drops a packet for its priority. */
const bit<3>  PRIO_BEST_EFFORT   = 0;
const bit<3>  PRIO_MAX           = 7;

/* Indices into the special_pkts counter (packets that got no echelon priority). */
const bit<32> SPECIAL_PLAIN      = 0;   /* IPv4 without an echelon header   */
const bit<32> SPECIAL_UNKNOWN    = 1;   /* echelon ID nobody registered     */
const bit<32> SPECIAL_SPOOFED    = 2;   /* echelon ID registered, not for this source */
const bit<32> SPECIAL_MALFORMED  = 3;   /* parser error: truncated or bad version */
const bit<32> SPECIAL_NON_IPV4   = 4;   /* not IPv4: dropped, no route      */
const bit<32> SPECIAL_TTL_EXPIRED = 5;  /* TTL <= 1 on arrival: dropped     */
const bit<32> SPECIAL_IPV4_OPTIONS = 6; /* IPv4 with options: dropped (see ingress) */
const bit<32> SPECIAL_COUNT      = 8;

/* Sizes: the controller reads them from the P4Info to detect a full table. */
#define ECHELON_CLASSES   1024   /* per-echelon counter slots (class_id range) */
#define CLASSIFY_SIZE     4096   /* (source, echelon) registrations           */
#define DEADLINE_SIZE     8192   /* deadline ranges over all echelons          */
#define LPM_SIZE          1024

#endif
