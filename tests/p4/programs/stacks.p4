/* -*- P4_16 -*-
 * Header stacks and parser lookahead, written for the differential test:
 * a source-route-like label stack parsed with extract(.next) and .last until
 * a bottom-of-stack bit (error.StackOutOfBounds past 4 labels), lookahead of
 * a bit<N> and of a whole header in select() and assignments, and in ingress
 * push_front / pop_front (by 1 and by 2), writes to elements by constant
 * index, setValid/setInvalid of elements. The labels are re-emitted, so the
 * egress bytes show every stack operation. */
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header label_t { bit<7> port; bit<8> ttl; bit<1> bos; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> src; bit<32> dst;
}
header peek_t { bit<4> version; bit<4> ihl; bit<8> tos; }
header info_t { bit<8> peeked; bit<16> peek16; bit<8> depth; bit<8> err; }

struct headers_t { ethernet_t ethernet; label_t[4] labels; ipv4_t ipv4; info_t info; }
struct meta_t { bit<8> peeked; bit<16> peek16; bit<8> depth; peek_t peek; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        meta.peek16 = pkt.lookahead<bit<16>>();
        transition select(hdr.ethernet.etherType) {
            0x88b5: parse_label;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_label {
        pkt.extract(hdr.labels.next);
        meta.depth = meta.depth + 1;
        transition select(hdr.labels.last.bos) {
            1: after_labels;
            default: parse_label;
        }
    }
    state after_labels {
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        meta.peek = pkt.lookahead<peek_t>();
        meta.peeked = meta.peek.tos;
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action route(bit<9> port) { sm.egress_spec = port; }
    action push_two(bit<7> p) {
        sm.egress_spec = (bit<9>)p;
        hdr.labels.push_front(2);
        hdr.labels[0].setValid();
        hdr.labels[0].port = p;
        hdr.labels[0].ttl = 64;
        hdr.labels[1].setValid();
        hdr.labels[1].port = p + 1;
        hdr.labels[1].bos = 1;
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; push_two; }
        default_action = drop();
        size = 64;
    }
    apply {
        hdr.info.setValid();
        hdr.info.peeked = meta.peeked;
        hdr.info.peek16 = meta.peek16;
        hdr.info.depth = meta.depth;
        hdr.info.err = (bit<8>)(sm.parser_error == error.StackOutOfBounds ? 1w1 : 1w0);
        if (hdr.labels[0].isValid()) {
            sm.egress_spec = (bit<9>)hdr.labels[0].port;
            if (hdr.labels[0].ttl == 0) {
                hdr.labels.pop_front(2);
            } else {
                hdr.labels.pop_front(1);
            }
            if (hdr.labels[3].isValid()) { hdr.labels[3].setInvalid(); }
            if (hdr.labels[1].isValid()) { hdr.labels[1].ttl = hdr.labels[1].ttl - 1; }
        } else if (hdr.ipv4.isValid()) {
            routes.apply();
            if (hdr.ipv4.tos == 0xb8) {
                hdr.labels.push_front(1);
                hdr.labels[0].setValid();
                hdr.labels[0].port = 0x7f;
                hdr.labels[0].bos = 1;
            }
        } else {
            drop();
        }
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.labels); pkt.emit(hdr.info); pkt.emit(hdr.ipv4); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
