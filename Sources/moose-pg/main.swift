// `moose-pg`: the `moose` commands with PostgreSQL stores (`--store postgres://…`) handled in this
// process. `moose`, which links no SwiftNIO, execs this binary for such a store.
import MooseCLI

#if MoosePostgres
MooseCLIProgram.run(postgres: .backend { try PostgresBackend.open($0) })
#else
// Built without the MoosePostgres trait: a file store works as in `moose`; a postgres:// store says
// how to build this binary (and never execs itself).
MooseCLIProgram.run(
    postgres: .backend { _ in
        throw CLIError.usage(
            "this moose-pg was built without PostgreSQL support: swift build --product moose-pg --traits MoosePostgres")
    })
#endif
