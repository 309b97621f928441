import Synchronization
import Foundation
struct Box { var items: [Int] = []; var closed = false }
final class Owner: Sendable {
    let inbox = Mutex(Box())
    func send(_ x: Int) { inbox.withLock { $0.items.append(x) } }
    func drain() -> [Int] { inbox.withLock { b in defer { b.items.removeAll(keepingCapacity: true) }; return b.items } }
}
let owner = Owner()
let t = Thread { for i in 0..<20000 { owner.send(i) } }
t.start()
var total = 0
for _ in 0..<20000 { total += owner.drain().count }
Thread.sleep(forTimeInterval: 0.5)
total += owner.drain().count
print("total \(total)")
