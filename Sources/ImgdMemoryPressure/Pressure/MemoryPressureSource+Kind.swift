extension MemoryPressureSource {
    /// What the path in `MEMORY_PRESSURE_WATCH` is, which decides how it is watched.
    public enum Kind: Sendable, Equatable, CustomStringConvertible {
        /// A PSI file (a cgroup's `memory.pressure`): the bytes are written to register a
        /// trigger, and the kernel signals with `POLLPRI`.
        case psiFile
        /// A named pipe: each time something is written to it, that is an event.
        case fifo
        /// A Unix stream socket: we connect, write the bytes, and each time data arrives,
        /// that is an event. The other end closing the connection ends the watch.
        case socket

        public var description: String {
            switch self {
            case .psiFile: "PSI file"
            case .fifo: "FIFO"
            case .socket: "socket"
            }
        }
    }
}
