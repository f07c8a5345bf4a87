#!/usr/bin/python3
"""Checks of deploy/ (ctest label deploy): the Kubernetes manifests parse and have the
structure dseek needs, every variable they set is one dseek-node reads, the ConfigMap's
config passes `dseek config --check`, dseek-node reads a pod's environment as the
manifest gives it, and the Containerfile installs the runtime libraries the binaries
load. Nothing here runs a container or a cluster: these machines cannot.

    test_deploy.py SOURCE_DIR BINARY_DIR
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib
import unittest

import yaml

SOURCE = (pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]).resolve()
BINARY = (pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else SOURCE / "build").resolve()
K8S = SOURCE / "deploy" / "k8s"
POD_LABELS = {"app.kubernetes.io/name": "dseek", "app.kubernetes.io/instance": "dseek-train"}


def load_all():
    objects = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            objects.setdefault((doc["kind"], doc["metadata"]["name"] if "metadata" in doc else path.name), doc)
    return objects


OBJECTS = load_all()


def one(kind):
    found = [doc for (k, _), doc in OBJECTS.items() if k == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def container():
    pod = one("Job")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    return pod["containers"][0]


def env_of(c):
    return {e["name"]: e for e in c.get("env", [])}


def job_toml():
    return one("ConfigMap")["data"]["job.toml"]


def variables_dseek_node_reads():
    help_text = subprocess.run([str(BINARY / "bin" / "dseek-node"), "--help"], check=True,
                               capture_output=True, text=True, timeout=30).stdout
    line = next(l for l in help_text.splitlines() if l.startswith("Environment variables read:"))
    return set(line.split(":", 1)[1].split())


class Manifests(unittest.TestCase):
    def test_every_file_is_in_the_kustomization(self):
        listed = set(one("Kustomization")["resources"])
        files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
        self.assertEqual(listed, files)

    def test_the_coordinator_is_reachable_through_a_headless_service(self):
        service = one("Service")
        self.assertEqual(service["spec"]["clusterIP"], "None")
        self.assertTrue(service["spec"]["publishNotReadyAddresses"])
        self.assertEqual(service["spec"]["selector"], POD_LABELS)
        job = one("Job")
        pod = job["spec"]["template"]
        self.assertEqual(pod["metadata"]["labels"], POD_LABELS)
        self.assertEqual(pod["spec"]["subdomain"], service["metadata"]["name"])
        env = env_of(container())
        self.assertEqual(env["DSEEK_HEADLESS_SERVICE"]["value"], service["metadata"]["name"])
        ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
        self.assertEqual(ports["coordinator"], int(env["DSEEK_COORDINATOR_PORT"]["value"]))
        container_ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
        self.assertEqual(container_ports["coordinator"], ports["coordinator"])

    def test_the_nodes_are_an_indexed_job_whose_size_is_the_node_count(self):
        spec = one("Job")["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        self.assertEqual(spec["parallelism"], spec["completions"])
        self.assertEqual(int(env_of(container())["DSEEK_NODES"]["value"]), spec["parallelism"])

    def test_a_lost_pod_is_recreated_and_knows_it_is_a_restart(self):
        spec = one("Job")["spec"]
        self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")
        self.assertGreaterEqual(spec["backoffLimitPerIndex"], 1)
        rules = spec["podFailurePolicy"]["rules"]
        self.assertIn({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}, rules)
        # A permanent error (exit 3) or a bad command line (exit 2) is not retried.
        self.assertIn({"action": "FailJob", "onExitCodes": {"containerName": container()["name"],
                                                             "operator": "In", "values": [2, 3]}}, rules)
        restart = env_of(container())["DSEEK_RESTART_COUNT"]["valueFrom"]["fieldRef"]["fieldPath"]
        self.assertEqual(restart, "metadata.annotations['batch.kubernetes.io/job-index-failure-count']")
        self.assertIn("--resume", container()["args"])
        config = tomllib.loads(job_toml())
        self.assertGreater(config["elastic"]["rejoin_seconds"], 10)  # the Job's backoff is >= 10 s
        self.assertGreater(config["checkpoint"]["every_steps"], 0)

    def test_the_config_comes_from_the_configmap_and_the_secret_from_a_secret(self):
        c = container()
        pod = one("Job")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        self.assertEqual(volumes["config"]["configMap"]["name"], one("ConfigMap")["metadata"]["name"])
        self.assertEqual(pathlib.PurePosixPath(mounts["config"]["mountPath"]) / "job.toml",
                         pathlib.PurePosixPath(c["args"][c["args"].index("--config") + 1]))
        secret = env_of(c)["DSEEK_CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]
        self.assertEqual(secret, {"name": "dseek-cluster-secret", "key": "secret"})
        config = tomllib.loads(job_toml())
        self.assertNotIn("secret", config.get("cluster", {}))
        self.assertNotIn("Secret", {k for (k, _) in OBJECTS})  # no secret value in the repository
        for key in ("nodes", "node_id", "coordinator", "advertise_host"):
            self.assertNotIn(key, config.get("cluster", {}), "the pod's environment gives " + key)
        self.assertNotIn("run_dir", config["train"])
        self.assertEqual(mounts["runs"]["mountPath"], c["workingDir"])  # runs/<job> lands there
        claims = {d["metadata"]["name"] for (k, _), d in OBJECTS.items() if k == "PersistentVolumeClaim"}
        self.assertEqual({v["persistentVolumeClaim"]["claimName"] for v in volumes.values()
                          if "persistentVolumeClaim" in v}, claims)

    def test_the_nodes_talk_tls_with_the_certificates_of_a_secret(self):
        cluster = tomllib.loads(job_toml())["cluster"]
        self.assertNotIn("plaintext", cluster)
        pod = one("Job")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in container()["volumeMounts"]}
        self.assertEqual(volumes["tls"]["secret"]["secretName"], "dseek-cluster-tls")
        tls_dir = pathlib.PurePosixPath(mounts["tls"]["mountPath"])
        for key, name in (("tls_ca", "ca.crt"), ("tls_cert", "tls.crt"), ("tls_key", "tls.key")):
            self.assertEqual(pathlib.PurePosixPath(cluster[key]), tls_dir / name)

    def test_gpus_match_the_config(self):
        limits = container()["resources"]["limits"]
        config = tomllib.loads(job_toml())
        self.assertEqual(int(limits["nvidia.com/gpu"]), config["cluster"]["gpus_per_node"])
        self.assertEqual(config["train"]["device"], "cuda")

    def test_metrics_are_scraped_on_one_port_per_pod(self):
        config = tomllib.loads(job_toml())["metrics"]
        self.assertFalse(config["prometheus_port_per_node"])
        port = config["prometheus_port"]
        annotations = one("Job")["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(int(annotations["prometheus.io/port"]), port)
        self.assertEqual(annotations["prometheus.io/path"], "/metrics")
        container_ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
        self.assertEqual(container_ports["metrics"], port)
        monitor = one("PodMonitor")
        self.assertEqual(monitor["spec"]["selector"]["matchLabels"], POD_LABELS)
        self.assertEqual(monitor["spec"]["podMetricsEndpoints"][0]["port"], "metrics")
        self.assertEqual(monitor["spec"]["podMetricsEndpoints"][0]["path"], "/metrics")

    def test_every_variable_the_manifests_set_is_one_dseek_node_reads(self):
        read = variables_dseek_node_reads()
        self.assertIn("JOB_COMPLETION_INDEX", read)
        for name in env_of(container()):
            self.assertIn(name, read)

    def test_the_configmap_config_passes_dseek_config_check(self):
        with tempfile.TemporaryDirectory() as scratch:
            path = pathlib.Path(scratch) / "job.toml"
            path.write_text(job_toml())
            nodes = env_of(container())["DSEEK_NODES"]["value"]
            for sets in ([], ["--set", "cluster.nodes=" + nodes]):
                result = subprocess.run([str(BINARY / "bin" / "dseek"), "config", "--check", str(path)] + sets,
                                        capture_output=True, text=True, timeout=30)
                self.assertEqual(result.returncode, 0, result.stderr)
            # docs/clusters.md's 256-replica mapping: 1024 ranks need a larger global batch.
            check = [str(BINARY / "bin" / "dseek"), "config", "--check", str(path), "--set", "cluster.nodes=256"]
            refused = subprocess.run(check, capture_output=True, text=True, timeout=30)
            self.assertEqual(refused.returncode, 3)  # a config error: never retried
            self.assertIn("train.batch_size (512) must be divisible by cluster.nodes x "
                          "cluster.gpus_per_node (1024)", refused.stderr)
            accepted = subprocess.run(check + ["--set", "train.batch_size=8192"],
                                      capture_output=True, text=True, timeout=30)
            self.assertEqual(accepted.returncode, 0, accepted.stderr)

    def test_dseek_node_reads_a_pods_environment_as_the_manifest_gives_it(self):
        c = container()
        env = {"PATH": "/usr/bin:/bin", "JOB_COMPLETION_INDEX": "1", "HOSTNAME": "dseek-train-1"}
        pod_fields = {"status.podIP": "10.0.0.5",
                      "metadata.annotations['batch.kubernetes.io/job-index-failure-count']": "2"}
        for name, entry in env_of(c).items():
            if "value" in entry:
                env[name] = entry["value"]
            elif "fieldRef" in entry["valueFrom"]:
                env[name] = pod_fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                env[name] = "test-secret"
        with tempfile.TemporaryDirectory() as scratch:
            path = pathlib.Path(scratch) / "job.toml"
            path.write_text(job_toml())
            # What the node checks before it joins, this host has instead of the pod's
            # volume and GPUs: a prepared data set, the CPU.
            (pathlib.Path(scratch) / "text").mkdir()
            (pathlib.Path(scratch) / "text" / "a.txt").write_text("some text to train on\n" * 200)
            # --raw: the repeated line is the whole document (the clean stage would drop it).
            prepared = subprocess.run([str(BINARY / "bin" / "dseek"), "data", "prepare", "--raw",
                                       "--input", str(pathlib.Path(scratch) / "text"), "--output",
                                       str(pathlib.Path(scratch) / "data")],
                                      capture_output=True, text=True, timeout=60)
            self.assertEqual(prepared.returncode, 0, prepared.stderr)
            # It cannot join (no pod 0 here): one attempt, then it stops. This host has no
            # pod's TLS Secret: without TLS a node on the pod network refuses to start
            # (exit 3), and starts, warned, with the opt-out.
            node = [str(BINARY / "bin" / "dseek-node"), "--config", str(path),
                    "--set", "cluster.join_retries=0",
                    "--set", 'data.dir="%s"' % (pathlib.Path(scratch) / "data"),
                    "--set", 'train.device="cpu"',
                    "--set", 'cluster.tls_ca=""', "--set", 'cluster.tls_cert=""', "--set", 'cluster.tls_key=""']
            refused = subprocess.run(node, env=env, cwd=scratch, capture_output=True, text=True, timeout=60)
            self.assertEqual(refused.returncode, 3, refused.stderr)
            self.assertIn('the job spans hosts (cluster.coordinator = "dseek-train-0.dseek:7420" is not loopback) and has no TLS', refused.stderr)
            result = subprocess.run(node + ["--set", "cluster.plaintext=true"],
                                    env=env, cwd=scratch, capture_output=True, text=True, timeout=60)
        out = result.stderr
        self.assertIn("warning: cluster.plaintext = true", out)
        self.assertIn("started by Kubernetes (job dseek-train)", out)
        self.assertIn("cluster.node_id = 1  <- JOB_COMPLETION_INDEX=1", out)
        self.assertIn("cluster.nodes = 4  <- DSEEK_NODES=4", out)
        self.assertIn('cluster.coordinator = "dseek-train-0.dseek:7420"', out)
        self.assertIn('cluster.advertise_host = "10.0.0.5"  <- DSEEK_POD_IP=10.0.0.5', out)
        self.assertIn('train.run_dir = "runs/dseek-train"', out)
        self.assertIn("restarted node, incarnation 2 <- DSEEK_RESTART_COUNT=2", out)
        self.assertIn("cannot join the coordinator at dseek-train-0.dseek:7420", out)


# What deploy/container/stage.sh puts into the image's bin/.
PROGRAMS = ("dseek-node", "dseek", "dseek-onnx-export")


class Containerfile(unittest.TestCase):
    TEXT = (SOURCE / "deploy" / "container" / "Containerfile").read_text()

    def instructions(self, name):
        return [line.split(None, 1)[1] for line in self.TEXT.splitlines() if line.startswith(name + " ")]

    def test_debian_12_a_non_root_user_and_dseek_node_as_entrypoint(self):
        self.assertRegex(self.instructions("FROM")[0], r"debian:12")
        user = self.instructions("USER")[-1]
        self.assertNotIn(user.split(":")[0], ("0", "root"))
        self.assertEqual(self.instructions("ENTRYPOINT"), ['["/usr/local/bin/dseek-node"]'])
        self.assertEqual({c.split()[0] for c in self.instructions("COPY")},
                         {"build/container/bin/", "build/container/lib/"})  # deploy/container/stage.sh

    def test_the_runtime_packages_cover_every_library_the_binaries_load(self):
        packages = set(re.search(r"--no-install-recommends\s+(.*?)\s*\\\s*\n\s*&&", self.TEXT, re.S)
                       .group(1).replace("\\", " ").split())
        for package in packages:
            self.assertFalse(package.endswith("-dev"), package)  # runtime libraries only
        subprocess.run(["apt-cache", "show"] + sorted(packages), check=True, capture_output=True,
                       timeout=60)  # each exists
        # What the installed ones pull in (their dependencies), and the base image's own.
        closure = set(packages) | {"libc6", "libgcc-s1", "libstdc++6"}
        depends = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                                  "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"]
                                 + sorted(packages), capture_output=True, text=True, timeout=120).stdout
        closure |= {l.strip().split()[-1] for l in depends.splitlines() if l.strip()}
        libraries = set()
        for program in PROGRAMS:
            ldd = subprocess.run(["ldd", str(BINARY / "bin" / program)], check=True,
                                 capture_output=True, text=True, timeout=30).stdout
            # /usr/local/cuda's libraries are no packages: stage.sh copies them into lib/.
            libraries |= {l for l in re.findall(r"=> (/\S+)", ldd) if not l.startswith("/usr/local/cuda")}
        self.assertGreater(len(libraries), 10)
        # dpkg -S knows a library by the path its package installed: the soname's link or its target.
        paths = sorted(libraries | {os.path.realpath(l) for l in libraries})
        owners = subprocess.run(["dpkg", "-S"] + paths, capture_output=True, text=True, timeout=60).stdout
        owned = {}
        for line in owners.splitlines():
            package, path = line.split(": ", 1)
            owned[path] = package.split(":")[0]
        for library in sorted(libraries):
            package = owned.get(library) or owned.get(os.path.realpath(library))
            self.assertIsNotNone(package, f"no package owns {library}")
            self.assertIn(package, closure, f"{library} is in {package}, which the image lacks")

    def test_stage_sh_puts_every_program_into_the_image(self):
        with tempfile.TemporaryDirectory() as scratch:
            out = pathlib.Path(scratch) / "container"
            env = dict(os.environ, DSEEK_BUILD_DIR=str(BINARY))
            staged = subprocess.run([str(SOURCE / "deploy" / "container" / "stage.sh"), str(out)],
                                    env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(staged.returncode, 0, staged.stderr)
            self.assertEqual(sorted(p.name for p in (out / "bin").iterdir()), sorted(PROGRAMS))
            # The ONNX export runs from the staged copy as from the build (it finds nothing
            # else beside it): its usage text, not a loader error.
            usage = subprocess.run([str(out / "bin" / "dseek-onnx-export")], capture_output=True,
                                   text=True, timeout=30)
            self.assertNotIn("error while loading shared libraries", usage.stderr)
            self.assertIn("dseek-onnx-export", usage.stdout + usage.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
