package awsprovider

import "testing"

// Every registered kind can be deleted and is found by some scan: its own,
// the VPC scan, or a named group scan (the IAM kinds, nodegroups with their
// cluster, Elastic IPs after the NAT gateways).
func TestEveryKindIsListedAndDeletable(t *testing.T) {
	listedByAnother := map[string]bool{
		KindEKSNodegroup: true, KindElasticIP: true,
		KindIAMInstanceProfile: true, KindIAMPolicy: true, KindIAMUser: true,
	}
	if len(registry) != len(registryOrder) || len(registry) < 16 {
		t.Fatalf("registry has %d kinds (%d in order)", len(registry), len(registryOrder))
	}
	for _, k := range registryOrder {
		if k.remove == nil {
			t.Errorf("kind %s has no remove", k.name)
		}
		own := k.scanTarget != nil || k.scanAccount != nil || k.inVPC != nil
		if own == listedByAnother[k.name] {
			t.Errorf("kind %s: lists itself %v, listed by another scan %v", k.name, own, listedByAnother[k.name])
		}
		if k.deps != nil && k.inVPC == nil {
			t.Errorf("kind %s declares deps but is not listed in a VPC", k.name)
		}
	}
}
