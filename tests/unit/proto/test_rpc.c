/* Unit tests of the message catalogue (daemon/proto/rpc.h): the rows fill the frame type
 * range exactly, once each, and the lookups and names follow from them. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proto/master_proto.h"
#include "daemon/proto/rpc.h"

START_TEST(test_rpc_rows_fill_the_type_range_once)
{
    bool seen[MC_WIRE__COUNT] = {false};

    ck_assert_uint_eq(mc_proto_rpcs_count, (MC_WIRE__COUNT - 1) / 2);
    for (size_t i = 0; i < mc_proto_rpcs_count; i++) {
        const struct mc_proto_rpc *r = &mc_proto_rpcs[i];

        ck_assert_msg(r->type % 2 == 1, "%s: a request type is odd", r->name);
        ck_assert_uint_lt(r->type + 1u, MC_WIRE__COUNT);
        ck_assert_msg(!seen[r->type], "%s: type %u twice", r->name, r->type);
        seen[r->type] = true;
        ck_assert(mc_wire_type_is_valid(r->type));
        ck_assert(!mc_wire_type_is_reply(r->type));
        ck_assert(mc_wire_type_is_reply(r->type + 1u));
        ck_assert_ptr_eq(mc_proto_rpc_of(r->type), r);
        ck_assert_ptr_eq(mc_proto_rpc_of(r->type + 1u), r);
        ck_assert_str_eq(mc_proto_type_name(r->type), r->name);
        ck_assert(r->request != NULL && r->request[0] != '\0');
        ck_assert(r->reply != NULL && r->reply[0] != '\0');
        ck_assert_msg(r->flags & (MC_RPC_TO_MASTER | MC_RPC_TO_OWNER | MC_RPC_PEER),
                      "%s: no direction", r->name);
        /* a batch's bound is the codecs' (READ_BATCH's its own, smaller one) */
        if (r->flags & MC_RPC_BATCH)
            ck_assert_uint_eq(r->items, r->type == MC_WIRE_READ_BATCH ? MC_PROTO_READ_BATCH_MAX
                                                                      : MC_PROTO_BATCH_MAX);
    }
    ck_assert_ptr_null(mc_proto_rpc_of(0));
    ck_assert_ptr_null(mc_proto_rpc_of(MC_WIRE__COUNT));
    ck_assert_str_eq(mc_proto_type_name(MC_WIRE__COUNT), "?");
    ck_assert_str_eq(mc_proto_type_name(MC_WIRE_LIST_REPLY), "LIST_REPLY");
}
END_TEST

/* The numbers are the wire's: they never change once released. */
START_TEST(test_rpc_types_keep_their_numbers)
{
    ck_assert_int_eq(MC_WIRE_HELLO, 1);
    ck_assert_int_eq(MC_WIRE_PUT_START_BATCH, 7);
    ck_assert_int_eq(MC_WIRE_FENCE, 21);
    ck_assert_int_eq(MC_WIRE_WRITE, 25);
    ck_assert_int_eq(MC_WIRE_READ_REPLY, 28);
    ck_assert_int_eq(MC_WIRE_LIST, 29);
    ck_assert_int_eq(MC_WIRE_COPY_REPLY, 34);
    ck_assert_int_eq(MC_WIRE_READ_BATCH, 43);
    ck_assert_int_eq(mc_proto_rpc_of(MC_WIRE_LIST)->items, MC_PROTO_LIST_MAX);
    ck_assert_int_eq(mc_proto_rpc_of(MC_WIRE_CLUSTER_INFO)->items, MC_PROTO_SEG_PAGE_MAX);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rpc");
    TCase *tc = tcase_create("catalogue");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_rpc_rows_fill_the_type_range_once);
    tcase_add_test(tc, test_rpc_types_keep_their_numbers);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
