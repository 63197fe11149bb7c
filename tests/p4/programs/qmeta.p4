/* Queueing metadata and registers, for the differential test against BMv2.
 *
 * A probe frame (EtherType 0x88B5) from port 1 goes to port 2 and from any
 * other port to port 1, at the priority its probe header asks for. Ingress
 * counts probes per priority in a register (read, then write + 1) and writes
 * the count it read into the probe; egress writes what the switch's queues
 * told it (v1model queueing metadata and timestamps) into the probe, so the
 * test reads them from the egress bytes. Other frames are forwarded at
 * priority 0 and left unchanged.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_PROBE = 0x88B5;
const bit<32> PRIORITIES = 8;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header probe_t {
    bit<8>  prio;         /* in: the queue to use */
    bit<32> seen;         /* out: probes of this priority before this one (register) */
    bit<32> enq_timestamp;
    bit<32> enq_qdepth;
    bit<32> deq_timedelta;
    bit<32> deq_qdepth;
    bit<32> ingress_ts;   /* low 32 bits of ingress_global_timestamp */
    bit<32> egress_ts;    /* low 32 bits of egress_global_timestamp */
}

struct headers_t {
    ethernet_t ethernet;
    probe_t    probe;
}

struct meta_t { }

parser QParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control QVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control QIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(PRIORITIES) probes_seen;

    apply {
        if (sm.ingress_port == 1) {
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 1;
        }
        if (hdr.probe.isValid()) {
            bit<32> seen;
            bit<32> index = (bit<32>) hdr.probe.prio[2:0];
            probes_seen.read(seen, index);
            probes_seen.write(index, seen + 1);
            hdr.probe.seen = seen;
            sm.priority = hdr.probe.prio[2:0];
        }
    }
}

control QEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.probe.isValid()) {
            hdr.probe.enq_timestamp = sm.enq_timestamp;
            hdr.probe.enq_qdepth = (bit<32>) sm.enq_qdepth;
            hdr.probe.deq_timedelta = sm.deq_timedelta;
            hdr.probe.deq_qdepth = (bit<32>) sm.deq_qdepth;
            hdr.probe.ingress_ts = sm.ingress_global_timestamp[31:0];
            hdr.probe.egress_ts = sm.egress_global_timestamp[31:0];
        }
    }
}

control QCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control QDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(QParser(), QVerify(), QIngress(), QEgress(), QCompute(), QDeparser()) main;
