# The two commands of the README.
.PHONY: demo test controlplane image release fresh-check

# The operator's main job: against $KUBECONFIG when set (read-only: `scan`; OPERATOR=1 runs the
# operator there too, which writes VolumeLeftovers and Events), else a local control plane with
# the mariadb demo scenario.
demo:
	OPERATOR=$(OPERATOR) ./scripts/demo.sh

# Every test: formatting, lints, unit tests, and the end-to-end tests on a real control plane.
test:
	./scripts/test.sh

# Build (or find in the cache) etcd, kube-apiserver, kube-controller-manager and kubectl.
controlplane:
	./scripts/ensure-tools.sh time
	./controlplane/build.sh

# The container image, without a daemon (buildah): the release binary, the four glibc files it
# loads and /etc/passwd, as an OCI layout (target/image/oci) and a docker-archive
# (target/image/volume-leftovers-VERSION.tar) for docker/podman load or ctr images import.
image:
	./scripts/image.sh

# Everything a release ships, into target/release-artifacts: the image (OCI layout and
# docker-archive), the chart (helm package), the kubectl plugin as kubectl-leftovers in a
# linux-amd64 .tar.gz with its sha256, krew's manifest (leftovers.yaml; its download URL from
# RELEASE_URL) and SHA256SUMS. With REGISTRY=host[:port][/path] it pushes the image and the chart
# there (REGISTRY_PLAIN_HTTP=1 for a registry without TLS). docs/operations.md, "Release and publish".
release:
	./scripts/release.sh

# The install steps of the scripts (every ensure-tools.sh line, seed-python.sh) run from nothing
# installed, in a bare Debian root made by mmdebstrap; prints the seconds of each step. make test
# runs it too.
fresh-check:
	./scripts/fresh-root.sh
