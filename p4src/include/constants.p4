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
/* The only IP version the switch forwards (others are dropped and counted). */
const bit<4>  IPV4_VERSION       = 4;

/* Strict-priority levels, simple_switch meaning: 7 is served first, 0 last.
 * Invariant: the program never writes a priority above PRIO_MAX, so a switch
 * started with --priority-queues 8 never drops a packet for its priority. */
const bit<3>  PRIO_BEST_EFFORT   = 0;
const bit<3>  PRIO_MAX           = 7;

/* Slots of the unprioritized_pkts counter: every packet that gets no echelon
 * priority is counted in exactly one, named after why. UNPRIO_DROP_* slots
 * count packets the switch drops; the others are forwarded at best effort. */
const bit<32> UNPRIO_PLAIN              = 0;  /* IPv4 without an echelon header (incl. non-first fragments) */
const bit<32> UNPRIO_UNKNOWN_ID         = 1;  /* echelon ID nobody registered                */
const bit<32> UNPRIO_SPOOFED_SOURCE     = 2;  /* echelon ID registered, not for this source  */
const bit<32> UNPRIO_MALFORMED_ECHELON  = 3;  /* parser error: truncated or bad-version echelon header */
const bit<32> UNPRIO_DROP_NOT_IPV4      = 4;  /* no (complete) IPv4 header: dropped          */
const bit<32> UNPRIO_DROP_TTL_EXPIRED   = 5;  /* TTL <= 1 on arrival: dropped               */
const bit<32> UNPRIO_DROP_IHL_NOT_5     = 6;  /* IHL != 5 (options, or an invalid IHL < 5): dropped */
const bit<32> UNPRIO_DROP_IPV4_VERSION  = 7;  /* IPv4 version field != 4: dropped            */
const bit<32> UNPRIO_DROP_IPV4_CHECKSUM = 8;  /* incoming IPv4 header checksum wrong: dropped */
#define UNPRIO_COUNT 16

/* Queue telemetry (egress): one cell per (egress port, priority) in each of
 * three registers, at index port * NUM_PRIORITIES + priority. Ports
 * 0..QUEUE_TELEMETRY_PORTS-1 are recorded; a packet to a higher port is
 * forwarded but not recorded. Cost: 3 registers x 512 cells x 32 bits = 6 KiB. */
#define NUM_PRIORITIES          8      /* 1 << width of metadata_t.prio */
#define QUEUE_TELEMETRY_PORTS   64
#define QUEUE_TELEMETRY_CELLS   512    /* QUEUE_TELEMETRY_PORTS * NUM_PRIORITIES */

/* Sizes: the controller reads them from the P4Info to detect a full table. */
/* Per-echelon counter slots: class_id_t (headers.p4) is exactly this wide, so
 * a class_id can never index past the echelon_pkts counter. */
#define CLASS_ID_BITS     10
#define ECHELON_CLASSES   1024   /* 1 << CLASS_ID_BITS */
#define CLASSIFY_SIZE     4096   /* (source, echelon) registrations           */
#define DEADLINE_SIZE     8192   /* deadline ranges over all echelons          */
#define LPM_SIZE          1024

#endif
