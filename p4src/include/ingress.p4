/* Ingress: L3 forwarding, then the echelon decision.
 *
 * Invariants (checked by ptf_tests/):
 *  - every forwarded IPv4 packet leaves with dscp == prio << 3 (CS0..CS7),
 *    whatever DSCP the sender wrote, so a downstream strict-priority queue
 *    enforces exactly the switch's decision;
 *  - only a (source address, echelon ID) pair the controller installed in
 *    echelon_classify gains a priority above PRIO_BEST_EFFORT;
 *  - nothing is dropped for being unknown, spoofed or malformed: it goes to
 *    best-effort and is counted in special_pkts (only non-IPv4, IPv4 with
 *    options, expired TTL and route misses are dropped). */
#ifndef _ECHELON_INGRESS_P4_
#define _ECHELON_INGRESS_P4_

control EchelonIngress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    /* One slot per registered echelon class (class_id), packets and bytes. */
    counter<bit<32>>(ECHELON_CLASSES, CounterType.packets_and_bytes) echelon_pkts;
    /* Best-effort and error accounting, indexed by the SPECIAL_* constants. */
    counter<bit<32>>(SPECIAL_COUNT, CounterType.packets_and_bytes) special_pkts;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* Next hop: rewrite MACs the way a router does and pick the egress port. */
    action ipv4_forward(mac_addr_t dstAddr, port_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr: lpm;
        }
        actions = {
            ipv4_forward;
            drop;
        }
        size = LPM_SIZE;
        default_action = drop();
    }

    /* A registered (source, echelon) pair: its counter slot and the priority
     * of its band (the band's top level, used when no deadline range hits). */
    action set_echelon(bit<16> class_id, bit<3> prio) {
        meta.class_id = class_id;
        meta.prio = prio;
        echelon_pkts.count((bit<32>) class_id);
    }

    table echelon_classify {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.echelon.echelon_id: exact;
        }
        actions = {
            set_echelon;
            NoAction;
        }
        size = CLASSIFY_SIZE;
        default_action = NoAction();
    }

    /* Every registered echelon ID, whoever its sources are: a classify miss
     * that hits here is a spoofed pair, one that misses is an unknown ID. */
    table echelon_ids {
        key = {
            hdr.echelon.echelon_id: exact;
        }
        actions = {
            NoAction;
        }
        size = ECHELON_CLASSES;
        default_action = NoAction();
    }

    /* Intra-echelon order: within a class, a deadline range maps to a level
     * of the class's band; ranges of one class never overlap, and an earlier
     * range never gets a lower level than a later one (controller invariant). */
    action set_deadline_prio(bit<3> prio) {
        meta.prio = prio;
    }

    table deadline_prio {
        key = {
            meta.class_id: exact;
            hdr.echelon.deadline_us: range;
        }
        actions = {
            set_deadline_prio;
            NoAction;
        }
        size = DEADLINE_SIZE;
        default_action = NoAction();
    }

    apply {
        meta.prio = PRIO_BEST_EFFORT;
        if (!hdr.ipv4.isValid()) {
            special_pkts.count(SPECIAL_NON_IPV4);
            drop();
            return;
        }
        if (hdr.ipv4.ihl != IPV4_IHL_MIN) {
            /* The checksum update covers the 20-byte header only, so a packet
             * with options would leave with a wrong checksum: drop it, counted. */
            special_pkts.count(SPECIAL_IPV4_OPTIONS);
            drop();
            return;
        }
        if (hdr.ipv4.ttl <= 1) {
            special_pkts.count(SPECIAL_TTL_EXPIRED);
            drop();
            return;
        }
        ipv4_lpm.apply();

        if (standard_metadata.parser_error != error.NoError) {
            /* Truncated or unknown-version echelon header: hdr.echelon may
             * still be valid (verify fails after extract), so it is ignored. */
            special_pkts.count(SPECIAL_MALFORMED);
        } else if (hdr.echelon.isValid()) {
            if (echelon_classify.apply().hit) {
                deadline_prio.apply();
            } else if (echelon_ids.apply().hit) {
                special_pkts.count(SPECIAL_SPOOFED);
            } else {
                special_pkts.count(SPECIAL_UNKNOWN);
            }
        } else {
            special_pkts.count(SPECIAL_PLAIN);
        }

        standard_metadata.priority = meta.prio;
        hdr.ipv4.dscp = ((bit<6>) meta.prio) << 3;
    }
}

/* Nothing to do after the queues: the decision was made at ingress. */
control EchelonEgress(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply { }
}

#endif
