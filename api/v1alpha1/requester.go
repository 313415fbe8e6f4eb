package v1alpha1

// RequestedByVerifiedAnnotation, on a Workload, is who the API server
// authenticated as the last writer of its manual request annotations
// (scribe.dev/promote, promote-full, abort, retry, requested-by,
// request-reason) or of this annotation: config/admission's requester
// policy writes it, whatever the writer put there. RequestedByAnnotation
// stays what the requester's client claims, which any writer may set to
// any name. The controller names this annotation's value as the requester
// only where it finds that policy in force for the Workload.
const RequestedByVerifiedAnnotation = "scribe.dev/requested-by-verified"
