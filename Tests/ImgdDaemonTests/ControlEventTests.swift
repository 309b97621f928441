import Foundation
@testable import ImgdDaemon
import ImgdProtocol
import ImgdTestSupport
import NIOCore
import Testing

@Suite("Control socket: subscriptions and events", .timeLimit(.minutes(5)), .offThePool)
struct ControlEventTests {
    @Test("subscribe to some events: only those arrive, numbered over all events, in order")
    func subscribeToSome() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        try await client.send(#"{"id":3,"cmd":"subscribe","events":["fetched","failed","fetched"]}"#)
        #expect(try await client.nextLine() == #"{"id":3,"ok":true,"result":{"subscribed":["fetched","failed"]}}"#)
        #expect(await eventually(timeout: .seconds(30)) { fixture.events.subscriberCount == 1 })
        fixture.events.publish("fetched", data: ["url": "http://a/1.png", "bytes": 812, "format": "png"])
        fixture.events.publish("evicted", data: ["count": 1, "bytes": 5, "reason": "size"])
        fixture.events.publish("failed", data: ["url": "http://a/2.png", "code": "dns", "message": "no such host"])
        #expect(try await client.nextLine() == #"{"event":"fetched","seq":1,"data":{"bytes":812,"format":"png","url":"http://a/1.png"}}"#)
        #expect(try await client.nextLine() == #"{"event":"failed","seq":3,"data":{"code":"dns","message":"no such host","url":"http://a/2.png"}}"#)
        // Requests still work between events.
        #expect(try await client.request(#"{"id":4,"cmd":"ping"}"#)["id"] == 4)
        await client.close()
        #expect(await eventually(timeout: .seconds(30)) { fixture.events.subscriberCount == 0 })
        await fixture.stop()
    }

    @Test("subscribe without names: every event; unknown names: invalid_argument naming events")
    func subscribeToAll() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        let unknown = try await client.request(#"{"id":1,"cmd":"subscribe","events":["fetched","nonsense"]}"#)
        #expect(unknown["error"]?["code"] == "invalid_argument")
        #expect(unknown["error"]?["message"]?.stringValue?.hasPrefix("invalid argument \"events\": unknown event \"nonsense\"") == true)
        let empty = try await client.request(#"{"id":2,"cmd":"subscribe","events":[]}"#)
        #expect(empty["error"]?["code"] == "invalid_argument")
        let wrongType = try await client.request(#"{"id":2,"cmd":"subscribe","events":"fetched"}"#)
        #expect(wrongType["error"]?["code"] == "invalid_argument")
        #expect(fixture.events.subscriberCount == 0)

        let all = try await client.request(#"{"id":3,"cmd":"subscribe"}"#)
        #expect(all["result"] == ["subscribed": JSONValue(EventHub.defaultEventNames)])
        for name in EventHub.defaultEventNames {
            fixture.events.publish(name, data: ["n": .string(name)])
        }
        for (index, name) in EventHub.defaultEventNames.enumerated() {
            let event = try await client.nextValue()
            #expect(event == ["event": .string(name), "seq": JSONValue(index + 1), "data": ["n": .string(name)]])
        }
        await client.close()
        await fixture.stop()
    }

    @Test("events published from several threads reach every subscriber in seq order")
    func concurrentPublishers() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let first = try await fixture.connect()
        let second = try await fixture.connect()
        for client in [first, second] {
            #expect(try await client.request(#"{"cmd":"subscribe","events":["fetched"]}"#)["ok"] == true)
        }
        let events = fixture.events
        await withTaskGroup(of: Void.self) { group in
            for publisher in 0..<4 {
                group.addTask {
                    for index in 0..<200 { events.publish("fetched", data: ["p": JSONValue(publisher), "i": JSONValue(index)]) }
                }
            }
        }
        for client in [first, second] {
            var sequences: [Int] = []
            for _ in 0..<800 {
                sequences.append(try #require(try await client.nextValue()["seq"]?.intValue))
            }
            #expect(sequences == Array(1...800))
        }
        #expect(fixture.events.lastSequence == 800)
        await first.close()
        await second.close()
        await fixture.stop()
    }

    @Test("a subscriber that stops reading: events past 1,000 queued are dropped, then one events_dropped line")
    func slowSubscriber() async throws {
        let folder = try ControlTestFolder()
        let fixture = try await ControlTestServer.start(at: folder.socketPath)
        let client = try await fixture.connect()
        #expect(try await client.request(#"{"cmd":"subscribe","events":["fetched"]}"#)["ok"] == true)
        try await client.stopReading()
        let total = 20_000
        let padding = String(repeating: "p", count: 100)
        for index in 0..<total {
            fixture.events.publish("fetched", data: ["i": JSONValue(index), "url": .string(padding)])
        }
        #expect(await eventually(timeout: .seconds(30)) { fixture.events.droppedCount > 0 })
        client.startReading()

        var received = 0
        var dropped = 0
        var notices: [JSONValue] = []
        var lastSequence = 0
        while received + dropped < total {
            let line = try await client.nextValue()
            let sequence = try #require(line["seq"]?.intValue)
            #expect(sequence > lastSequence)
            lastSequence = sequence
            if line["event"] == "events_dropped" {
                notices.append(line)
                dropped += try #require(line["data"]?["count"]?.intValue)
            } else {
                #expect(line["data"]?["i"] == JSONValue(sequence - 1))
                received += 1
            }
        }
        #expect(received + dropped == total)
        #expect(!notices.isEmpty)
        #expect(dropped == fixture.events.droppedCount)
        #expect(fixture.server.metrics.largestQueuedEvents <= 1000)
        #expect(fixture.server.metrics.largestQueuedOutputBytes <= 4 * 1_048_576)
        // Still subscribed and served afterwards.
        fixture.events.publish("fetched", data: ["i": "after"])
        #expect(try await client.nextValue()["seq"] == JSONValue(total + 1))
        #expect(fixture.server.connectionCount == 1)
        await client.close()
        await fixture.stop()
    }
}
