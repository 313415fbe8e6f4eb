//go:build !unix

package publish

// nonBlock is 0 off Unix, which has no FIFOs to block on.
const nonBlock = 0
