#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every program moose starts (a browser, a workload's token command) shares: it inherits the
/// descriptors its file actions set up and nothing else of moose's — not the loopback listener, not
/// the store, not a connection to a provider.
enum ChildProcess {
    /// Adds "close every descriptor from 3 up" to `actions` (Linux: glibc 2.34's
    /// `posix_spawn_file_actions_addclosefrom_np`, looked up at run time since Swift's Glibc module
    /// lacks it) or `POSIX_SPAWN_CLOEXEC_DEFAULT` to `attributes` (Darwin). `false` when this C
    /// library cannot: the caller must then not start the program.
    static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t, _ attributes: inout posix_spawnattr_t) -> Bool {
        #if os(Linux)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        guard let closeFrom = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return false }
        return unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3) == 0
        #elseif canImport(Darwin)
        return posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT)) == 0
        #else
        return false
        #endif
    }
}
