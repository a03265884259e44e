/* Unit tests of the master's request executor (daemon/master/exec.h): the table covers every
 * kind, and a batch through mc_master_exec answers as the service's own calls do (the path
 * both mc-master's handlers and the standalone agent's link take). Fake clock. */
#include <stdlib.h>
#include <string.h>

#include "daemon/master/exec.h"
#include "tests/unit/master/t_master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

START_TEST(test_exec_every_kind_has_a_row)
{
    struct mc_master *m = t_master();
    struct mc_master_req req = {.op = MC_MASTER_OP__COUNT};

    for (int op = 0; op < MC_MASTER_OP__COUNT; op++)
        ck_assert_str_ne(mc_master_op_name((enum mc_master_op)op), "?");
    ck_assert_str_eq(mc_master_op_name(MC_MASTER_OP__COUNT), "?");
    ck_assert(mc_master_op_is_batch(MC_MASTER_OP_PUT_START));
    ck_assert(!mc_master_op_is_batch(MC_MASTER_OP_NODE_REGISTER));
    ck_assert_int_eq(mc_master_exec(m, &req), MC_ERR_INVALID);
    mc_master_destroy(m);
}
END_TEST

/* put start, put end, get, exist, stat, remove: each a batch of two through the executor */
START_TEST(test_exec_batch_round_trip)
{
    struct mc_master *m = t_master();
    uint32_t node = t_node(m, "n1", "d1");
    struct mc_master_put_req puts[2] = {
        {.key = "a", .key_len = 1, .size = 4 * KiB, .writer = node,
         .preferred = MC_MASTER_NODE_NONE},
        {.key = "b", .key_len = 1, .size = 0, .writer = node, .preferred = MC_MASTER_NODE_NONE},
    };
    struct mc_master_key keys[2] = {{"a", 1}, {"b", 1}};
    struct mc_master_put_grant grants[2];
    struct mc_master_get_result gets[2];
    struct mc_master_stat stats[2];
    struct mc_master_ref ref = {.key = "a", .key_len = 1, .node = node};
    uint64_t counts[2];
    int res[2];
    struct mc_master_req req = {.op = MC_MASTER_OP_PUT_START, .node = node, .n = 2,
                                .results = res, .in.put = puts, .out.grant = grants};

    t_seg(m, node, MiB);
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 0);
    ck_assert_int_eq(res[1], MC_ERR_INVALID); /* size 0: per item, the batch goes on */
    ref.version = grants[0].version;
    req = (struct mc_master_req){.op = MC_MASTER_OP_PUT_END, .node = node, .n = 1,
                                 .results = res, .in.ref = &ref};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 0);

    req = (struct mc_master_req){.op = MC_MASTER_OP_GET, .node = node, .n = 2, .results = res,
                                 .in.key = keys, .out.get = gets};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 0);
    ck_assert_uint_eq(gets[0].version, grants[0].version);
    ck_assert_int_eq(res[1], MC_ERR_NOT_FOUND);

    req = (struct mc_master_req){.op = MC_MASTER_OP_EXIST, .node = node, .n = 2,
                                 .results = res, .in.key = keys};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 1);
    ck_assert_int_eq(res[1], 0);

    req = (struct mc_master_req){.op = MC_MASTER_OP_STAT, .node = node, .n = 2, .results = res,
                                 .in.key = keys, .out.stat = stats};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 1);
    ck_assert_uint_eq(stats[0].size, 4 * KiB);
    ck_assert_int_eq(res[1], 0);

    req = (struct mc_master_req){.op = MC_MASTER_OP_REMOVE, .node = node, .n = 2,
                                 .results = res, .in.key = keys, .out.count = counts};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 0);
    ck_assert_uint_eq(counts[0], 1);
    ck_assert_int_eq(res[1], MC_ERR_NOT_FOUND);
    ck_assert_uint_eq(counts[1], 0);
    ck_assert_int_eq(t_exist(m, "a"), 0);
    mc_master_destroy(m);
}
END_TEST

/* EXIST with MC_MASTER_EXEC_F_PREFIX: after the first absent key nothing is looked up */
START_TEST(test_exec_exist_prefix_stops_at_first_absent)
{
    struct mc_master *m = t_master();
    uint32_t node = t_node(m, "n1", "d1");
    struct mc_master_key keys[3] = {{"x", 1}, {"y", 1}, {"z", 1}};
    int res[3];
    struct mc_master_req req = {.op = MC_MASTER_OP_EXIST, .node = node,
                                .flags = MC_MASTER_EXEC_F_PREFIX, .n = 3, .results = res,
                                .in.key = keys};

    t_seg(m, node, MiB);
    t_put(m, "x", 100, 0, node);
    t_put(m, "z", 100, 0, node);
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[0], 1);
    ck_assert_int_eq(res[1], 0);
    ck_assert_int_eq(res[2], 0); /* present, but past the first miss */
    req.flags = 0;
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res[2], 1);
    mc_master_destroy(m);
}
END_TEST

/* FENCE_ACK: only the node that owns the segment may say it is fenced */
START_TEST(test_exec_fence_ack_by_other_node_denied)
{
    struct mc_master *m = t_master();
    uint32_t owner = t_node(m, "n1", "d1"), other = t_node(m, "n2", "d2");
    uint32_t seg = t_seg(m, owner, MiB);
    struct mc_master_fence f = {.seg = seg, .alloc = 0, .version = 1};
    int res;
    struct mc_master_req req = {.op = MC_MASTER_OP_FENCE_ACK, .node = other, .n = 1,
                                .results = &res, .in.fence = &f};

    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res, MC_ERR_DENIED);
    req.node = owner;
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_int_eq(res, MC_ERR_NOT_FOUND); /* the owner: no such block, but not denied */
    mc_master_destroy(m);
}
END_TEST

/* node kinds: register, heartbeat (drain state), drain, leave */
START_TEST(test_exec_node_kinds)
{
    struct mc_master *m = t_master();
    struct mc_master_req req = {.op = MC_MASTER_OP_NODE_REGISTER,
                                .u.reg = {.name = "n1", .domain = NULL}};
    uint32_t node;

    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    node = req.u.reg.node;
    req = (struct mc_master_req){.op = MC_MASTER_OP_DRAIN, .u.drain = {"n1", true}};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    req = (struct mc_master_req){.op = MC_MASTER_OP_HEARTBEAT, .node = node};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    ck_assert_uint_ne(req.u.hb.drain, MC_MASTER_DRAIN_NONE);
    req = (struct mc_master_req){.op = MC_MASTER_OP_NODE_LEAVE, .node = node};
    ck_assert_int_eq(mc_master_exec(m, &req), 0);
    req = (struct mc_master_req){.op = MC_MASTER_OP_HEARTBEAT, .node = node};
    ck_assert_int_ne(mc_master_exec(m, &req), 0);
    mc_master_destroy(m);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("master_exec");
    TCase *tc = tcase_create("exec");

    tcase_add_test(tc, test_exec_every_kind_has_a_row);
    tcase_add_test(tc, test_exec_batch_round_trip);
    tcase_add_test(tc, test_exec_exist_prefix_stops_at_first_absent);
    tcase_add_test(tc, test_exec_fence_ack_by_other_node_denied);
    tcase_add_test(tc, test_exec_node_kinds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(exec_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
