package controller

// Artifact builds a Flux artifact (tar.gz) of files and its digest, for the
// envtest tests of package controller_test.
var Artifact = artifact
