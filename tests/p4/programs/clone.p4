/* -*- P4_16 -*-
 * clone (I2E and E2E), resubmit and recirculate, written for the differential
 * test. The frame's first payload byte says what to do: ingress clones it to
 * session 5 or 6 (a session no one configured: no clone), resubmits it once,
 * or egress recirculates it once or clones it to session 7; metadata fields
 * are preserved across each by @field_list. Every output frame carries an
 * `info` header with instance_type, packet_length, the preserved and the
 * reset metadata, egress_spec as egress sees it, so the egress bytes show
 * what each instance saw. mark_to_drop in egress drops a packet after its
 * E2E clone was made. */
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
header cmd_t { bit<8> op; bit<8> arg; }
header info_t {
    bit<8> instance_type; bit<16> packet_length; bit<16> espec; bit<16> eport;
    bit<8> kept; bit<8> lost; bit<8> passes; bit<16> iport;
}

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; cmd_t cmd; info_t info; }
struct meta_t {
    @field_list(1, 2)
    bit<8> kept;
    bit<8> lost;
    @field_list(1, 2, 3)
    bit<8> passes;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; 0x88b6: parse_info; default: accept; }
    }
    state parse_info {
        pkt.extract(hdr.info);
        transition select(hdr.info.kept) { 0: accept; default: parse_ipv4; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.cmd);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action route(bit<9> port) { sm.egress_spec = port; }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        size = 64;
    }
    apply {
        if (!hdr.ipv4.isValid() || !hdr.cmd.isValid()) { drop(); return; }
        routes.apply();
        meta.passes = meta.passes + 1;
        if (sm.instance_type == 0) {
            meta.kept = hdr.cmd.arg;
            meta.lost = 0x77;
        }
        if (hdr.cmd.op == 1) {
            clone(CloneType.I2E, 5);
        } else if (hdr.cmd.op == 2) {
            clone_preserving_field_list(CloneType.I2E, 6, 1);
        } else if (hdr.cmd.op == 3 && sm.instance_type == 0) {
            resubmit_preserving_field_list(2);
        } else if (hdr.cmd.op == 6) {
            clone_preserving_field_list(CloneType.I2E, 5, 1);
            mark_to_drop(sm);
        } else if (hdr.cmd.op == 8) {
            clone(CloneType.I2E, 9);
        }
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.cmd.op == 4 && sm.instance_type == 0) {
            recirculate_preserving_field_list(3);
        } else if (hdr.cmd.op == 5 && sm.instance_type == 0) {
            clone_preserving_field_list(CloneType.E2E, 7, 2);
        } else if (hdr.cmd.op == 7 && sm.instance_type == 0) {
            clone(CloneType.E2E, 7);
            mark_to_drop(sm);
        }
        if (!hdr.info.isValid()) { hdr.info.setValid(); }
        hdr.info.instance_type = (bit<8>)sm.instance_type;
        hdr.info.packet_length = (bit<16>)sm.packet_length;
        hdr.info.espec = (bit<16>)sm.egress_spec;
        hdr.info.eport = (bit<16>)sm.egress_port;
        hdr.info.kept = meta.kept;
        hdr.info.lost = meta.lost;
        hdr.info.passes = meta.passes;
        hdr.info.iport = (bit<16>)sm.ingress_port;
        if (sm.instance_type == 4) { hdr.ethernet.etherType = 0x88b6; }
        if (hdr.cmd.op == 4 && sm.instance_type == 0) { hdr.ethernet.etherType = 0x88b6; }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.info); pkt.emit(hdr.ipv4); pkt.emit(hdr.cmd); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
