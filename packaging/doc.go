// Package packaging holds no code: its tests check the release, container
// and service files beside it (.goreleaser.yaml at the repository root,
// container/, systemd/, helm/) with the tools that consume them.
package packaging
