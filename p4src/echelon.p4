/* -*- P4_16 -*-
 * EchelonFlow data plane for v1model / BMv2 simple_switch_grpc started with
 * --priority-queues 8. Reads the echelon header (echelon ID, deadline offset)
 * of registered training-job traffic and places each packet in a
 * strict-priority queue: the echelon's band from the controller's inter-group
 * order, the level inside it from the flow's deadline. See docs/pipeline.md. */
#include <core.p4>
/* v1model.p4 defaults to V1MODEL_VERSION 20180101, where counter is not
 * generic; the counter<bit<32>>(...) instances in ingress.p4 need 20200408. */
#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20200408
#endif
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/ingress.p4"

V1Switch(EchelonParser(),
         EchelonVerifyChecksum(),
         EchelonIngress(),
         EchelonEgress(),
         EchelonComputeChecksum(),
         EchelonDeparser()) main;
