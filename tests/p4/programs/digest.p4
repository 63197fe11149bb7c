/* -*- P4_16 -*-
 * digest and mark_to_drop, written for the differential test: ingress sends
 * a digest of (source MAC, ingress port, a 3-bit field) for frames of an
 * unknown source, also when the frame is then dropped with mark_to_drop (BMv2
 * learns before its drop check), a second digest type for IPv4 frames, and
 * drops in egress too. */
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct mac_learn_t { bit<48> src; bit<9> port; bit<3> flags; }
struct flow_t { bit<32> src; bit<8> protocol; }
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action route(bit<9> port) { sm.egress_spec = port; }
    action learn() {
        digest<mac_learn_t>(1, { hdr.ethernet.src, sm.ingress_port, hdr.ipv4.flags });
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        size = 64;
    }
    table sources {
        key = { hdr.ethernet.src: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        size = 64;
    }
    apply {
        if (!hdr.ipv4.isValid()) { drop(); return; }
        routes.apply();
        sources.apply();
        if (hdr.ipv4.protocol == 6) {
            digest<flow_t>(1, { hdr.ipv4.src, hdr.ipv4.protocol });
        }
        if (hdr.ipv4.ttl == 0) { mark_to_drop(sm); }
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { if (hdr.ipv4.ttl == 1) { mark_to_drop(sm); } }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
