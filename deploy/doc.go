// Package deploy holds what runs steadydns on a host: the systemd unit
// (steadydns.service) and its system user (steadydns.sysusers), which
// `make install` installs. Its tests verify the unit and run the server
// with the unit's user and capabilities.
package deploy
