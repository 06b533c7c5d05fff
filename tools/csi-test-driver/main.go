// The project's own test CSI driver: the smallest controller a CSI snapshotter sidecar can cut
// and delete snapshots with, and a CSI resizer sidecar can grow volumes with, for the e2e tests
// only. It is not a storage driver: its "backend" is a JSON file (-state) listing the snapshots it
// holds, which the tests read as they would list a cloud's snapshots, and its volumes are the
// volume handles of statically created PVs. The real CSI hostpath driver is not served by the Go
// module proxy this project builds from; the sidecars (external-snapshotter's csi-snapshotter,
// external-resizer's csi-resizer) and the snapshot-controller talking to it are the real ones.
//
// Identity: GetPluginInfo, GetPluginCapabilities (controller service, online volume expansion),
// Probe.
// Controller: ControllerGetCapabilities (CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS, EXPAND_VOLUME),
// CreateSnapshot (idempotent by name), DeleteSnapshot (idempotent), ListSnapshots,
// ControllerExpandVolume; everything else is Unimplemented.
//
// ControllerExpandVolume grows any volume to the size asked (no node expansion needed), except
// one whose handle is `limit-<bytes>-<name>`: above <bytes> it answers OutOfRange, the final
// error the resizer records as ControllerResizeInfeasible; at most <bytes>, it grows.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// snapshot is one backend snapshot, as the state file lists it.
type snapshot struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Source  string `json:"source"`
	Size    int64  `json:"size"`
	Created int64  `json:"created"`
}

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	name  string
	size  int64
	state string
	mu    sync.Mutex
	snaps map[string]snapshot
}

func (d *driver) save() error {
	list := make([]snapshot, 0, len(d.snaps))
	for _, s := range d.snaps {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	tmp := d.state + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, d.state)
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}, {
		Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE,
		}},
	}}}, nil
}

// limitOf is the size a `limit-<bytes>-<name>` volume cannot grow past (0: any other volume,
// which has no limit).
func limitOf(volumeID string) int64 {
	rest, ok := strings.CutPrefix(volumeID, "limit-")
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	want := req.GetCapacityRange().GetRequiredBytes()
	if want <= 0 {
		return nil, status.Error(codes.InvalidArgument, "capacity_range.required_bytes is required")
	}
	if limit := limitOf(req.GetVolumeId()); limit > 0 && want > limit {
		log.Printf("refused to grow %s to %d bytes (its limit is %d)", req.GetVolumeId(), want, limit)
		return nil, status.Errorf(codes.OutOfRange, "volume %s cannot grow past %d bytes (asked: %d)", req.GetVolumeId(), limit, want)
	}
	log.Printf("grew %s to %d bytes", req.GetVolumeId(), want)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: want, NodeExpansionRequired: false}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (s snapshot) csi() *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.Source,
		SizeBytes:      s.Size,
		CreationTime:   timestamppb.New(time.Unix(0, s.Created)),
		ReadyToUse:     true,
	}
}

func (d *driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" || req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "name and source_volume_id are required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.snaps {
		if s.Name == req.GetName() {
			if s.Source != req.GetSourceVolumeId() {
				return nil, status.Errorf(codes.AlreadyExists, "snapshot %s exists for another volume", s.Name)
			}
			return &csi.CreateSnapshotResponse{Snapshot: s.csi()}, nil
		}
	}
	sum := sha256.Sum256([]byte(req.GetName()))
	s := snapshot{
		ID:      "snap-" + hex.EncodeToString(sum[:8]),
		Name:    req.GetName(),
		Source:  req.GetSourceVolumeId(),
		Size:    d.size,
		Created: time.Now().UnixNano(),
	}
	d.snaps[s.ID] = s
	if err := d.save(); err != nil {
		delete(d.snaps, s.ID)
		return nil, status.Errorf(codes.Internal, "saving the state: %v", err)
	}
	log.Printf("created %s (%s) of %s", s.ID, s.Name, s.Source)
	return &csi.CreateSnapshotResponse{Snapshot: s.csi()}, nil
}

func (d *driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.snaps[req.GetSnapshotId()]
	if !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	delete(d.snaps, s.ID)
	if err := d.save(); err != nil {
		d.snaps[s.ID] = s
		return nil, status.Errorf(codes.Internal, "saving the state: %v", err)
	}
	log.Printf("deleted %s", s.ID)
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *driver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*csi.ListSnapshotsResponse_Entry
	ids := make([]string, 0, len(d.snaps))
	for id := range d.snaps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := d.snaps[id]
		if req.GetSnapshotId() != "" && req.GetSnapshotId() != s.ID {
			continue
		}
		if req.GetSourceVolumeId() != "" && req.GetSourceVolumeId() != s.Source {
			continue
		}
		out = append(out, &csi.ListSnapshotsResponse_Entry{Snapshot: s.csi()})
	}
	return &csi.ListSnapshotsResponse{Entries: out}, nil
}

func main() {
	endpoint := flag.String("endpoint", "", "unix:///path/to/csi.sock")
	name := flag.String("name", "test.csi.leftovers.dev", "the driver's name")
	state := flag.String("state", "", "the JSON file listing the snapshots held (the 'backend')")
	size := flag.Int64("snapshot-size", 1<<30, "size_bytes of every snapshot")
	flag.Parse()
	path, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok || *state == "" {
		fmt.Fprintln(os.Stderr, "usage: csi-test-driver -endpoint unix:///path.sock -state FILE")
		os.Exit(2)
	}
	d := &driver{name: *name, size: *size, state: *state, snaps: map[string]snapshot{}}
	if b, err := os.ReadFile(*state); err == nil {
		var list []snapshot
		if err := json.Unmarshal(b, &list); err != nil {
			log.Fatalf("reading %s: %v", *state, err)
		}
		for _, s := range list {
			d.snaps[s.ID] = s
		}
	}
	if err := d.save(); err != nil {
		log.Fatalf("writing %s: %v", *state, err)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listening on %s: %v", path, err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		srv.GracefulStop()
	}()
	log.Printf("%s serving on %s, state %s", *name, path, *state)
	if err := srv.Serve(l); err != nil {
		log.Fatalf("serving: %v", err)
	}
}
