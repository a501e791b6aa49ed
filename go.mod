module github.com/steadydns/steadydns

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
