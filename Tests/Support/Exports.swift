// Repo-only test helpers (the repo's fixtures, its test identity provider, the scripted browser that
// signs in there) next to the public MooseTesting product, which every test also sees through this.
@_exported import MooseTesting
