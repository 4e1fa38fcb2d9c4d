package sdk

import (
	"time"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var capToPB = map[Capability]pb.Capability{
	CapPreflight:      pb.Capability_CAPABILITY_PREFLIGHT,
	CapHooks:          pb.Capability_CAPABILITY_HOOKS,
	CapPivotInputs:    pb.Capability_CAPABILITY_PIVOT_INPUTS,
	CapTeardownPolicy: pb.Capability_CAPABILITY_TEARDOWN_POLICY,
	CapDiscover:       pb.Capability_CAPABILITY_DISCOVER,
	CapSweep:          pb.Capability_CAPABILITY_SWEEP,
	CapKindConfig:     pb.Capability_CAPABILITY_KIND_CONFIG,
}

var phaseToPB = map[Phase]pb.Phase{
	PhaseAfterKindCreate: pb.Phase_PHASE_AFTER_KIND_CREATE,
}

var removalToPB = map[HostRemoval]pb.HostRemoval{
	RemoveByDeletingCluster: pb.HostRemoval_HOST_REMOVAL_DELETE_CLUSTER,
	RemoveContainers:        pb.HostRemoval_HOST_REMOVAL_REMOVE_CONTAINERS,
	RemoveManually:          pb.HostRemoval_HOST_REMOVAL_MANUAL,
}

var stateToPB = map[SweepState]pb.SweepState{
	SweepPlanned:  pb.SweepState_SWEEP_STATE_PLANNED,
	SweepDeleting: pb.SweepState_SWEEP_STATE_DELETING,
	SweepDeleted:  pb.SweepState_SWEEP_STATE_DELETED,
	SweepSkipped:  pb.SweepState_SWEEP_STATE_SKIPPED,
	SweepRetrying: pb.SweepState_SWEEP_STATE_RETRYING,
	SweepFailed:   pb.SweepState_SWEEP_STATE_FAILED,
}

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var (
	capFromPB     = invert(capToPB)
	phaseFromPB   = invert(phaseToPB)
	removalFromPB = invert(removalToPB)
	stateFromPB   = invert(stateToPB)
)

func resourceToPB(r Resource) *pb.Resource {
	out := &pb.Resource{Kind: r.Kind, Id: r.ID, Region: r.Region, Cluster: r.Cluster, Tags: r.Tags, Evidence: r.Evidence, DependsOn: r.DependsOn}
	if r.CreatedAt != nil {
		out.CreatedAt = timestamppb.New(*r.CreatedAt)
	}
	return out
}

func resourceFromPB(r *pb.Resource) Resource {
	out := Resource{Kind: r.GetKind(), ID: r.GetId(), Region: r.GetRegion(), Cluster: r.GetCluster(), Tags: r.GetTags(), Evidence: r.GetEvidence(), DependsOn: r.GetDependsOn()}
	if r.GetCreatedAt() != nil {
		t := r.GetCreatedAt().AsTime().In(time.UTC)
		out.CreatedAt = &t
	}
	return out
}
