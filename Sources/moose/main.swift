// `moose`: OAuth 2.0 / OpenID Connect tokens from the shell (the commands are in MooseCLI). It links no
// SwiftNIO, so that `moose token` starts fast; a postgres:// store is handed to `moose-pg` (exec).
import MooseCLI

MooseCLIProgram.run(postgres: .handoff)
