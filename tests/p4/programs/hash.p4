/* -*- P4_16 -*-
 * The v1model `hash` extern, written for the differential test: every
 * HashAlgorithm BMv2 implements (crc16, crc32, crc16_custom, crc32_custom,
 * csum16, xor16, identity) over fields of odd widths and constants, with
 * base and max (modify_field_with_hash_based_offset), from constants and
 * from action data, and `random` over a one-value range; the results are written
 * into a header the deparser emits after UDP, so the egress bytes show them. */
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
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }
header tcp_t { bit<16> sport; bit<16> dport; bit<32> seq; }
header hashes_t {
    bit<16> crc16; bit<32> crc32; bit<16> crc16c; bit<32> crc32c;
    bit<16> csum16; bit<16> xor16; bit<48> ident; bit<8> ecmp;
    bit<32> wide; bit<12> narrow; bit<4> rnd;
}

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; tcp_t tcp; hashes_t h; }
struct meta_t { bit<8> bucket; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: parse_udp; 6: parse_tcp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action route(bit<9> port) { sm.egress_spec = port; }
    action ecmp(bit<8> base, bit<8> n) {
        hash(hdr.h.ecmp, HashAlgorithm.crc16, base,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.protocol, hdr.udp.sport, hdr.udp.dport }, n);
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        size = 64;
    }
    table balance {
        key = { hdr.ipv4.protocol: exact; }
        actions = { ecmp; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    apply {
        if (!hdr.ipv4.isValid()) { drop(); return; }
        routes.apply();
        /* Only over valid headers: BMv2 keeps an invalid header's old field values. */
        if (!hdr.udp.isValid()) { return; }
        hdr.h.setValid();
        hash(hdr.h.crc16, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.flags, hdr.ipv4.fragOffset }, 17w65536);
        hash(hdr.h.crc32, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.udp.sport, hdr.udp.csum, hdr.ipv4.protocol },
             33w0x100000000);
        hash(hdr.h.crc16c, HashAlgorithm.crc16_custom, 16w0,
             { hdr.ethernet.src, hdr.ipv4.ihl, hdr.ipv4.version }, 17w65536);
        hash(hdr.h.crc32c, HashAlgorithm.crc32_custom, 32w0,
             { hdr.ipv4.ttl, hdr.udp.dport, 8w0x5a }, 33w0x100000000);
        hash(hdr.h.csum16, HashAlgorithm.csum16, 16w0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.ttl }, 17w65536);
        hash(hdr.h.xor16, HashAlgorithm.xor16, 16w0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.tos, hdr.ipv4.ihl }, 17w65536);
        hash(hdr.h.ident, HashAlgorithm.identity, 48w0,
             { hdr.ipv4.flags, hdr.ipv4.dst, hdr.udp.dport, hdr.ipv4.ttl }, 49w0x1000000000000);
        hash(hdr.h.wide, HashAlgorithm.crc32, 32w1000, { hdr.ipv4.src }, 32w77777);
        hash(hdr.h.narrow, HashAlgorithm.crc16, 12w5, { hdr.ipv4.dst, hdr.udp.len }, 13w4000);
        random(hdr.h.rnd, 4w9, 4w9);
        balance.apply();
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); pkt.emit(hdr.tcp); pkt.emit(hdr.h); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
