package main

import (
	"testing"

	"github.com/steadydns/steadydns/controlplane/api"
)

func TestFleetLine(t *testing.T) {
	got := fleetLine(api.FleetView{ID: "a1", Roles: []string{"aggregator"}, Cell: "eu", ConfigSource: "nats", ConfigHash: "00000000000000ff", Revision: 3,
		Capacity: []api.CapacityView{{Resource: "aggregator_checker_checks", Used: 8192, Limit: 131072}}})
	want := "host a1 (aggregator), cell eu, aggregator_checker_checks 8192 of 131072; config nats, hash 00000000000000ff, revision 3"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
