/* Ingress: L3 forwarding, then the echelon decision.
 *
 * Invariants (checked by ptf_tests/):
 *  - every forwarded IPv4 packet leaves with dscp == prio << 3 (CS0..CS7),
 *    whatever DSCP the sender wrote, so a downstream strict-priority queue
 *    enforces exactly the switch's decision;
 *  - only a (source address, echelon ID) pair the controller installed in
 *    echelon_classify gains a priority above PRIO_BEST_EFFORT;
 *  - nothing is dropped for being unknown, spoofed or malformed: it goes to
 *    best-effort and is counted in unprioritized_pkts (only non-IPv4, IPv4
 *    with a version other than 4, an IHL other than 5 or a wrong header
 *    checksum, expired TTL and route misses are dropped; all but route
 *    misses are counted in an UNPRIO_DROP_* slot). */
#ifndef _ECHELON_INGRESS_P4_
#define _ECHELON_INGRESS_P4_

control EchelonIngress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    /* One slot per registered echelon class (class_id), packets and bytes. */
    counter<bit<32>>(ECHELON_CLASSES, CounterType.packets_and_bytes) echelon_pkts;
    /* Every packet that gets no echelon priority, in one slot per reason
     * (the UNPRIO_* constants): forwarded at best effort or dropped. */
    counter<bit<32>>(UNPRIO_COUNT, CounterType.packets_and_bytes) unprioritized_pkts;

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
    action set_echelon(class_id_t class_id, bit<3> prio) {
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

    /* Count a packet that gets no echelon priority, and drop it. */
    action drop_counted(bit<32> reason) {
        unprioritized_pkts.count(reason);
        mark_to_drop(standard_metadata);
    }

    apply {
        meta.prio = PRIO_BEST_EFFORT;
        /* Checks in this order; the first that fails names the drop reason. */
        if (!hdr.ipv4.isValid()) {
            drop_counted(UNPRIO_DROP_NOT_IPV4);
        } else if (hdr.ipv4.version != IPV4_VERSION) {
            drop_counted(UNPRIO_DROP_IPV4_VERSION);
        } else if (hdr.ipv4.ihl != IPV4_IHL_MIN) {
            /* Options (ihl > 5) or an impossible header length (ihl < 5): the
             * checksum covers the 20-byte header only, so an options packet
             * would leave with a wrong checksum. */
            drop_counted(UNPRIO_DROP_IHL_NOT_5);
        } else if (standard_metadata.checksum_error == 1) {
            /* EchelonVerifyChecksum found a wrong incoming header checksum. */
            drop_counted(UNPRIO_DROP_IPV4_CHECKSUM);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_counted(UNPRIO_DROP_TTL_EXPIRED);
        } else {
            ipv4_lpm.apply();
            if (standard_metadata.parser_error != error.NoError) {
                /* Truncated or unknown-version echelon header: hdr.echelon may
                 * still be valid (verify fails after extract), so it is ignored. */
                unprioritized_pkts.count(UNPRIO_MALFORMED_ECHELON);
            } else if (hdr.echelon.isValid()) {
                if (echelon_classify.apply().hit) {
                    deadline_prio.apply();
                } else if (echelon_ids.apply().hit) {
                    unprioritized_pkts.count(UNPRIO_SPOOFED_SOURCE);
                } else {
                    unprioritized_pkts.count(UNPRIO_UNKNOWN_ID);
                }
            } else {
                unprioritized_pkts.count(UNPRIO_PLAIN);
            }
            standard_metadata.priority = meta.prio;
            hdr.ipv4.dscp = ((bit<6>) meta.prio) << 3;
            /* The queue this packet will wait in, for the egress telemetry (computed
             * here once: egress_spec is the egress_port of a unicast packet). */
            meta.queue_cell = ((bit<32>) standard_metadata.egress_spec) * NUM_PRIORITIES
                              + (bit<32>) meta.prio;
        }
    }
}

/* Egress: queue telemetry. The forwarding decision was made at ingress; here
 * each packet leaving a priority queue records what that queue looked like,
 * from the switch's queueing metadata (v1model: depths in packets of the
 * packet's own priority queue, sojourn in microseconds).
 *
 * The queue is named by (egress port, priority). v1model has no queue id in
 * standard_metadata, so the priority is meta.prio, the value ingress copied
 * to standard_metadata.priority (and so the queue the packet waited in);
 * ingress computes the cell, meta.queue_cell, when it makes that decision.
 *
 * Invariants, per cell port * NUM_PRIORITIES + prio (the controller reads them):
 *  - queue_depth holds the depth the last departing packet left behind
 *    (deq_qdepth): 0 once the queue has drained, whatever it held before;
 *  - queue_depth_max never decreases except when the controller resets it,
 *    and is at least 1 once any packet left that queue: it is the most packets
 *    the queue held just before one of its departures (deq_qdepth + 1). That
 *    is the queue's peak: a queue grows only at enqueues and every peak ends
 *    with a departure, so the first packet out after a burst records it;
 *  - queue_sojourn_us holds the last departing packet's time in the queue.
 * Cost per packet: one comparison and one action (3 register writes, 1 read). */
control EchelonEgress(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    register<bit<32>, bit<32>>(QUEUE_TELEMETRY_CELLS) queue_depth;
    register<bit<32>, bit<32>>(QUEUE_TELEMETRY_CELLS) queue_depth_max;
    register<bit<32>, bit<32>>(QUEUE_TELEMETRY_CELLS) queue_sojourn_us;

    action record_queue() {
        bit<32> held = ((bit<32>) standard_metadata.deq_qdepth) + 1;
        bit<32> most;
        queue_depth_max.read(most, meta.queue_cell);
        queue_depth_max.write(meta.queue_cell, held > most ? held : most);
        queue_depth.write(meta.queue_cell, (bit<32>) standard_metadata.deq_qdepth);
        queue_sojourn_us.write(meta.queue_cell, standard_metadata.deq_timedelta);
    }

    apply {
        if (standard_metadata.egress_port < QUEUE_TELEMETRY_PORTS) {
            record_queue();
        }
    }
}

#endif
