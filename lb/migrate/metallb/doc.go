// Package metallb converts MetalLB's configuration objects (metallb.io
// v1beta1 and v1beta2: IPAddressPool, AddressPool, L2Advertisement,
// BGPPeer, BGPAdvertisement, Community) into edgelb's pools and announce
// settings, and reports every field that has no edgelb equivalent.
//
// Objects are read as generic maps and every field is taken out as it is
// converted; whatever is left afterwards is reported, so a field this
// package does not know (a newer MetalLB) is never dropped silently.
package metallb
