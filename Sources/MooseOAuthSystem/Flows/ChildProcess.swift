#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
package import Darwin
#endif

/// What every program moose starts (a browser, a workload's token command) shares: it inherits the
/// descriptors its file actions set up and nothing else of moose's — not the loopback listener, not
/// the store, not a connection to a provider.
package enum ChildProcess {
    /// Adds "close every descriptor from 3 up" to `actions` (Linux: glibc 2.34's
    /// `posix_spawn_file_actions_addclosefrom_np`, looked up at run time since Swift's Glibc module
    /// lacks it) or `POSIX_SPAWN_CLOEXEC_DEFAULT` to `attributes` with 0–2 inherited (Darwin). `false` when this C
    /// library cannot: the caller must then not start the program.
    package static func closeInheritedDescriptors(
        _ actions: inout posix_spawn_file_actions_t, _ attributes: inout posix_spawnattr_t
    ) -> Bool {
        #if os(Linux)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        guard let closeFrom = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return false }
        return unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3) == 0
        #elseif canImport(Darwin)
        // CLOEXEC_DEFAULT closes every descriptor no file action names, 0–2 included: they are named
        // here as inherited (what the caller's earlier actions put there stays), as on Linux, where
        // only 3 and up are closed.
        for descriptor: Int32 in 0...2 {
            guard posix_spawn_file_actions_addinherit_np(&actions, descriptor) == 0 else { return false }
        }
        return posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT)) == 0
        #else
        return false
        #endif
    }
}

extension ChildProcess {
    /// Adds `flags` to `attributes`' spawn flags (`posix_spawnattr_setflags` replaces them all).
    private static func addFlags(_ flags: Int32, _ attributes: inout posix_spawnattr_t) -> Bool {
        var current: Int16 = 0
        guard posix_spawnattr_getflags(&attributes, &current) == 0 else { return false }
        return posix_spawnattr_setflags(&attributes, Int16(truncatingIfNeeded: Int32(current) | flags)) == 0
    }

    /// The child starts with the default signal mask and dispositions, whatever `moose` blocks or
    /// ignores (it blocks SIGINT and SIGTERM while it waits for a redirect, for instance): a child
    /// that inherited them could not be stopped by them.
    package static func defaultSignals(_ attributes: inout posix_spawnattr_t) -> Bool {
        var empty = sigset_t(), all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        return posix_spawnattr_setsigmask(&attributes, &empty) == 0
            && posix_spawnattr_setsigdefault(&attributes, &all) == 0
            && addFlags(Int32(POSIX_SPAWN_SETSIGMASK) | Int32(POSIX_SPAWN_SETSIGDEF), &attributes)
    }

    /// The child starts in a session of its own (`setsid`): signals a terminal or a job control sends
    /// to the caller's process group (Ctrl-C, a hang-up, a CI runner stopping the job's group) do not
    /// reach it. `false` where this C library cannot (glibc before 2.26).
    package static func detach(_ attributes: inout posix_spawnattr_t) -> Bool {
        #if os(Linux)
        // glibc's POSIX_SPAWN_SETSID (<spawn.h>, __USE_GNU; not in Swift's Glibc module).
        return addFlags(0x80, &attributes)
        #else
        return false
        #endif
    }
}
