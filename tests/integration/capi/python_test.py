"""Tests of the loft Python package (python/loft) over the built libloft.

Run: LOFT_LIBRARY=build/lib/libloft.so python3 tests/integration/capi/python_test.py
(ctest capi_python_test sets LOFT_LIBRARY and LOFT_SOURCE_DIR).
"""
import os
import sys
import unittest

SRC = os.environ.get("LOFT_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import loft  # noqa: E402

B = 256


def make_planner(policy):
    p = loft.Planner(policy, B, overlap=True)
    for node, c0, c1 in [(0, 2.0, 0.05), (1, 2.0, 0.05), (2, 4.0, 0.2)]:
        p.add_worker(node, c0, c1, local_per_sample_ms=0.001, remote_fixed_ms=2.0, remote_per_sample_ms=0.06,
                     uplink_per_sample_ms=0.06, min_batch=8, max_batch=B, local_available=5000)
    return p


class PlannerTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(loft.version(), r"^\d+\.\d+\.\d+$")

    def test_policies_plan_sum_to_b(self):
        for policy in ["uniform", "lbbsp", "pid", "loft"]:
            with make_planner(policy) as p:
                for _ in range(3):
                    bound = p.bound_ms()  # the cost models refit after observe
                    plan = p.plan()
                    self.assertEqual(plan.policy, policy)
                    self.assertEqual([w.node for w in plan], [0, 1, 2])
                    self.assertEqual(sum(w.batch for w in plan), B)
                    self.assertAlmostEqual(plan.makespan_ms, max(w.predicted_ms for w in plan))
                    self.assertLessEqual(bound, plan.makespan_ms + 1e-6)
                    for w in plan:
                        p.observe(w.node, w.batch, w.local, w.remote, 0.1, 0.5, w.predicted_ms * 0.8,
                                  w.predicted_ms)

    def test_loft_gives_slow_worker_less(self):
        with make_planner("loft") as p:
            plan = p.plan()
            self.assertLess(plan[2].batch, plan[0].batch)
            self.assertEqual(len(p.cost(2)), 7)

    def test_cost_profile_round_trips_in_cost_fields_order(self):
        with loft.Planner("loft", 64) as p:
            p.add_worker(0, 2.0, 0.05, local_per_sample_ms=0.001, remote_fixed_ms=3.0, remote_per_sample_ms=0.06,
                         uplink_per_sample_ms=0.07, min_batch=8, max_batch=64, local_available=100,
                         local_fixed_ms=0.5)
            profile = dict(zip(loft.COST_FIELDS, p.cost(0)))
            self.assertEqual(profile, {"compute_fixed_ms": 2.0, "compute_per_sample_ms": 0.05,
                                       "local_fixed_ms": 0.5, "local_per_sample_ms": 0.001,
                                       "remote_fixed_ms": 3.0, "remote_per_sample_ms": 0.06,
                                       "uplink_per_sample_ms": 0.07})

    def test_errors(self):
        with self.assertRaisesRegex(loft.LoftError, "unknown policy 'nope'"):
            loft.Planner("nope", B)
        with make_planner("loft") as p:
            with self.assertRaisesRegex(loft.LoftError, "already added"):
                p.add_worker(0, 1.0, 0.1, max_batch=B)
            with self.assertRaisesRegex(loft.LoftError, "no worker 7"):
                p.set_local_available(7, 1)
        empty = loft.Planner("uniform", B)
        with self.assertRaises(loft.LoftError):
            empty.plan()
        empty.close()
        empty.close()  # idempotent: the handle is destroyed once


class SimTest(unittest.TestCase):
    def test_sim_run(self):
        with open(os.path.join(SRC, "examples", "clusters", "compute-hetero.yaml")) as f:
            spec = f.read()
        s = loft.sim_run(spec, "loft,uniform", iterations=20)
        self.assertEqual(sorted(s["policies"]), ["loft", "uniform"])
        self.assertEqual(s["policies"]["loft"]["iterations"], 20)
        self.assertIn("bound_mean_iteration_ms", s)
        self.assertLessEqual(s["bound_mean_iteration_ms"], s["policies"]["loft"]["mean_iteration_ms"] + 1e-6)

    def test_sim_errors(self):
        with self.assertRaisesRegex(loft.LoftError, "YAML"):
            loft.sim_run("nodes: [", "loft")
        with self.assertRaisesRegex(loft.LoftError, "unknown policy 'bogus'"):
            with open(os.path.join(SRC, "examples", "clusters", "homogeneous.yaml")) as f:
                loft.sim_run(f.read(), "bogus")


class ConsumerTest(unittest.TestCase):
    def test_bad_endpoint(self):
        with self.assertRaisesRegex(loft.LoftError, "ipc:// or tcp://"):
            loft.Consumer("bogus")

    def test_timeout(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with loft.Consumer(f"ipc://{d}/nobody.sock") as c:
                with self.assertRaisesRegex(loft.LoftError, "timeout"):
                    c.next(timeout_ms=100)
                self.assertEqual(list(c.batches(timeout_ms=50)), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
