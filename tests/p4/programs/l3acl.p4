/* -*- P4_16 -*-
 * A second v1model program, written only to show that the soft switch runs
 * p4c's JSON in general, not just echelon.p4: L2/L3 forwarding with a VLAN
 * header stack, a ternary/range/optional ACL, const entries, a register, an
 * egress pipeline, `if` inside actions and IPv4 checksum verify/update.
 * tests/softswitch/test_ssw_differential.py runs the same packets through
 * BMv2 and the soft switch with this program and compares every byte. */
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> src; bit<32> dst;
}
header l4_t { bit<16> sport; bit<16> dport; }

struct headers_t {
    ethernet_t ethernet;
    vlan_t[2]  vlan;
    ipv4_t     ipv4;
    l4_t       l4;
}
struct meta_t {
    bit<16> l4_dport;
    bit<8>  acl_hits;
    bit<1>  routed;
    bit<12> vid;
}

error { BadIpVersion }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8100 &&& 0xEFFF: parse_vlan;     /* 0x8100 and 0x9100 */
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan.next);
        meta.vid = hdr.vlan.last.vid;
        transition select(hdr.vlan.last.etherType) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadIpVersion);
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, 6): parse_l4;
            (0, 17): parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        pkt.extract(hdr.l4);
        meta.l4_dport = hdr.l4.dport;
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    /* Packets seen per ingress port: bit<9> index, 512 cells, never out of range. */
    register<bit<32>, bit<32>>(512) port_pkts;
    counter<bit<32>>(8, CounterType.packets_and_bytes) verdicts;

    action drop() { mark_to_drop(sm); }
    action l2_forward(bit<9> port) { sm.egress_spec = port; }
    action route(bit<48> dmac, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dmac;
        meta.routed = 1;
        if (hdr.ipv4.ttl > 0) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
    action deny(bit<32> reason) { verdicts.count(reason & 7); mark_to_drop(sm); }
    action permit() { meta.acl_hits = meta.acl_hits + 1; }
    action set_prio(bit<3> prio) {
        sm.priority = prio;
        hdr.ipv4.tos = (bit<8>) prio << 5 | (hdr.ipv4.tos & 0x1F);
    }

    table dmac {
        key = { hdr.ethernet.dst: exact; meta.vid: exact; }
        actions = { l2_forward; drop; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        size = 256;
    }
    table acl {
        key = {
            hdr.ipv4.src: ternary;
            hdr.ipv4.dst & 0xFFFFFF00: ternary;
            hdr.ipv4.protocol: ternary;
            meta.l4_dport: range;
            sm.ingress_port: optional;
        }
        actions = { deny; permit; set_prio; NoAction; }
        default_action = NoAction();
        size = 128;
    }
    /* Fixed policy: never route to the multicast range, whatever is installed. */
    table martians {
        key = { hdr.ipv4.dst: ternary; }
        actions = { deny; NoAction; }
        const entries = {
            0xE0000000 &&& 0xF0000000: deny(5);
            0x00000000 &&& 0xFF000000: deny(6);
        }
        default_action = NoAction();
    }

    apply {
        bit<32> seen;
        port_pkts.read(seen, (bit<32>) sm.ingress_port);
        seen = seen + 1;
        port_pkts.write((bit<32>) sm.ingress_port, seen);
        if (sm.parser_error != error.NoError) {
            verdicts.count(7);
            drop();
            exit;
        }
        if (hdr.ipv4.isValid() && sm.checksum_error == 0) {
            hdr.ipv4.identification = seen[15:0];
            switch (routes.apply().action_run) {
                route: {
                    if (martians.apply().hit) {
                        return;
                    }
                    acl.apply();
                }
                default: { verdicts.count(1); }
            }
        } else if (hdr.ipv4.isValid()) {
            verdicts.count(2);
            drop();
        } else {
            if (!dmac.apply().hit) {
                verdicts.count(3);
                sm.egress_spec = (bit<9>) (hdr.ethernet.dst[7:0] & 3);
            }
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.vlan[1].isValid()) {
            /* Q-in-Q: strip the inner tag, keep the outer. */
            hdr.vlan[0].etherType = hdr.vlan[1].etherType;
            hdr.vlan[1].setInvalid();
        }
        if (hdr.vlan[0].isValid() && hdr.vlan[0].vid == 0xFFF) {
            mark_to_drop(sm);
        } else if (meta.routed == 1 && hdr.l4.isValid()) {
            hdr.l4.sport = hdr.l4.sport ^ (bit<16>) sm.egress_port;
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.l4);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
