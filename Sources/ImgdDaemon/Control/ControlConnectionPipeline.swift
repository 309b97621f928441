import Logging
import NIOCore

/// The handlers that serve one admitted control connection: the line decoder, then the
/// connection handler (parsing, limits, ordered replies, `subscribe`). The server builds every
/// connection with it, and the fuzzer builds its in-memory connections with it too, so what is
/// fuzzed is the daemon's own framing and parsing, not a copy of it.
@_spi(Fuzzing)
public enum ControlConnectionPipeline {
    /// Adds the handlers for a connection from `peer` to `pipeline`.
    static func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations, settings: ControlConnectionSettings, peer: ControlPeer
    ) throws {
        let streamSwitch = ControlStreamSwitch()
        let decoder = ControlLineDecoder(maxLineBytes: settings.limits.maxLineBytes, metrics: settings.metrics, streamSwitch: streamSwitch)
        try pipeline.addHandler(ByteToMessageHandler(decoder))
        try pipeline.addHandler(ControlConnectionHandler(settings: settings, peer: peer, streamSwitch: streamSwitch))
    }

    /// Adds the handlers a server with these `limits`, `handler` and `events` gives a connection
    /// from `peer`; `log` gets what the server would log.
    public static func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations, limits: ControlLimits, handler: any ControlCommandHandler,
        events: EventHub, peer: ControlPeer, logger: Logger
    ) throws {
        let settings = ControlConnectionSettings(
            limits: limits, handler: handler, events: events, logger: logger, metrics: ControlMetrics(),
            histograms: DaemonHistograms())
        try addHandlers(to: pipeline, settings: settings, peer: peer)
    }
}
