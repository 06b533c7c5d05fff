// The two programs that node/build.sh packs into local OCI images (no image registry is
// reachable): the pod sandbox "pause" image and a probe workload for the node tests.
module volume-leftovers/node/images

go 1.26.0
