/// Reads the parts of a control-socket reply (parsed by `JSONSerialization`) that the tests
/// check on a refused request.
enum ControlReply {
    /// The `error.code` of a failed reply; nil for a success.
    static func errorCode(_ reply: [String: Any]) -> String? {
        (reply["error"] as? [String: Any])?["code"] as? String
    }

    /// The `error.message` of a failed reply; empty for a success.
    static func errorMessage(_ reply: [String: Any]) -> String {
        (reply["error"] as? [String: Any])?["message"] as? String ?? ""
    }
}
