// The converge WorkerService: the one contract between a broker and the workers that run
// provider handler code. Every worker form (Rust, Python and Go SDKs, stdworker exec, WASM,
// Starlark, CEL, or any program that speaks this file) uses exactly this stream.
//
// Conventions that hold for every message below:
// - UUIDs travel as 16 raw bytes; an empty `bytes` UUID means "none".
// - User JSON (spec, status, config, operation input/output) travels as `bytes` holding UTF-8
//   JSON and is never re-encoded by the broker.
// - Times are milliseconds since the Unix epoch; 0 means "not set".
// - Field numbers are the contract: never renumber, and list retired numbers as `reserved`.
import { enumDesc, fileDesc, messageDesc, serviceDesc } from "@bufbuild/protobuf/codegenv2";
/**
 * Describes the file converge/worker/v1/worker.proto.
 */
export const file_converge_worker_v1_worker = /*@__PURE__*/ fileDesc("Ch9jb252ZXJnZS93b3JrZXIvdjEvd29ya2VyLnByb3RvEhJjb252ZXJnZS53b3JrZXIudjEi8gEKE1dvcmtTdHJlYW1DbGllbnRNc2cSMgoJc3Vic2NyaWJlGAEgASgLMh0uY29udmVyZ2Uud29ya2VyLnYxLlN1YnNjcmliZUgAEjUKCGNvbXBsZXRlGAIgASgLMiEuY29udmVyZ2Uud29ya2VyLnYxLlN0YWdlQ29tcGxldGVIABIwCghpbnRlcmVzdBgDIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5JbnRlcmVzdEgAEjYKCWhlYXJ0YmVhdBgEIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5Xb3JrSGVhcnRiZWF0SABCBgoEYm9keSKWAgoTV29ya1N0cmVhbVNlcnZlck1zZxItCgR0YXNrGAEgASgLMh0uY29udmVyZ2Uud29ya2VyLnYxLlN0YWdlVGFza0gAEjoKBmNvbmZpZxgCIAEoCzIoLmNvbnZlcmdlLndvcmtlci52MS5Qcm92aWRlckNvbmZpZ1VwZGF0ZUgAEi4KA2FjaxgDIAEoCzIfLmNvbnZlcmdlLndvcmtlci52MS5Db21wbGV0ZUFja0gAEjAKBmNhbmNlbBgEIAEoCzIeLmNvbnZlcmdlLndvcmtlci52MS5DYW5jZWxUYXNrSAASKgoFZHJhaW4YBSABKAsyGS5jb252ZXJnZS53b3JrZXIudjEuRHJhaW5IAEIGCgRib2R5Iq0BCglTdWJzY3JpYmUSDQoFa2luZHMYASADKAkSFAoMbWF4X2luZmxpZ2h0GAIgASgNEhUKDWtpbmRfdmVyc2lvbnMYAyADKAUSMAoHcmVzdW1lZBgEIAMoCzIfLmNvbnZlcmdlLndvcmtlci52MS5SZXN1bWVkVGFzaxITCgt3b3JrZXJfbmFtZRgFIAEoCRILCgNzZGsYBiABKAkSEAoIZHJ5X3J1bnMYByABKAgiNwoLUmVzdW1lZFRhc2sSEwoLbGVhc2VfdG9rZW4YASABKAkSEwoLY2xhaW1fZXBvY2gYAiABKAMiOQoNV29ya0hlYXJ0YmVhdBITCgtsZWFzZV90b2tlbhgBIAMoCRITCgtjbGFpbV9lcG9jaBgCIAMoAyJSCghJbnRlcmVzdBIMCgRraW5kGAEgASgJEg4KBmNyZWRpdBgCIAEoBRISCgpoYXNfd29ya2VyGAMgASgIEhQKDGtpbmRfdmVyc2lvbhgEIAEoBSJaChRQcm92aWRlckNvbmZpZ1VwZGF0ZRIMCgRraW5kGAEgASgJEhQKDGtpbmRfdmVyc2lvbhgCIAEoBRIOCgZjb25maWcYAyABKAwSDgoGYnVuZGxlGAQgASgMIrYFCglTdGFnZVRhc2sSKAoFc3RhZ2UYASABKA4yGS5jb252ZXJnZS53b3JrZXIudjEuU3RhZ2USDAoEa2luZBgCIAEoCRIUCgxraW5kX3ZlcnNpb24YAyABKAUSEwoLcmVzb3VyY2VfaWQYBCABKAwSEgoKZ2VuZXJhdGlvbhgFIAEoAxIQCghyZWFjdGlvbhgGIAEoCRITCgtsZWFzZV90b2tlbhgHIAEoCRITCgtjbGFpbV9lcG9jaBgIIAEoAxIYChBtYW5pZmVzdF92ZXJzaW9uGAkgASgDEhcKD3Byb3ZpZGVyX2NvbmZpZxgKIAEoDBIXCg9wcm92aWRlcl9idW5kbGUYCyABKAwSGAoQdGFza19kZWFkbGluZV9tcxgMIAEoAxI5Cgtjb21wb3NlX3JlcRgNIAEoCzIiLmNvbnZlcmdlLndvcmtlci52MS5Db21wb3NlUmVxdWVzdEgAEjMKCHdvcmtfcmVxGA4gASgLMh8uY29udmVyZ2Uud29ya2VyLnYxLldvcmtSZXF1ZXN0SAASNwoKcm9sbHVwX3JlcRgPIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5Sb2xsdXBSZXF1ZXN0SAASNwoKZGVsZXRlX3JlcRgQIAEoCzIhLmNvbnZlcmdlLndvcmtlci52MS5EZWxldGVSZXF1ZXN0SAASOQoLb3BlcmF0ZV9yZXEYESABKAsyIi5jb252ZXJnZS53b3JrZXIudjEuT3BlcmF0ZVJlcXVlc3RIABI1CglyZWFjdF9yZXEYEiABKAsyIC5jb252ZXJnZS53b3JrZXIudjEuUmVhY3RSZXF1ZXN0SAASDwoHdHJpZ2dlchgTIAEoCRIPCgdhdHRlbXB0GBQgASgFEg8KB2RyeV9ydW4YFSABKAhCCQoHcmVxdWVzdCKfAwoIUmVzb3VyY2USCgoCaWQYASABKAwSDAoEa2luZBgCIAEoCRIMCgRuYW1lGAMgASgJEhAKCG93bmVyX2lkGAQgASgMEg8KB3Jvb3RfaWQYBSABKAwSDAoEc3BlYxgGIAEoDBIOCgZzdGF0dXMYByABKAwSEgoKZ2VuZXJhdGlvbhgIIAEoAxISCgpzeW5jZWRfZ2VuGAkgASgDEhAKCGlzX3JlYWR5GAogASgIEhIKCmZpbmFsaXplcnMYCyADKAkSIAoYZGVsZXRpb25fcmVxdWVzdGVkX2F0X21zGAwgASgDEhcKD2Zyb3plbl91bnRpbF9tcxgNIAEoAxITCgtxdWFyYW50aW5lZBgOIAEoCBI4CgZsYWJlbHMYDyADKAsyKC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2UuTGFiZWxzRW50cnkSFAoMa2luZF92ZXJzaW9uGBAgASgFEg0KBXBoYXNlGBEgASgJGi0KC0xhYmVsc0VudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToCOAEiKQoLUmVzb3VyY2VSZWYSDAoEa2luZBgBIAEoCRIMCgRuYW1lGAIgASgJIjoKCVZhbHVlRmxvdxIXCg9kZXBlbmRlbnRfZmllbGQYASABKAkSFAoMc291cmNlX2ZpZWxkGAIgASgJIrUBCglDaGlsZFNwZWMSDAoEa2luZBgBIAEoCRIMCgRuYW1lGAIgASgJEgwKBHNwZWMYAyABKAwSOQoGbGFiZWxzGAQgAygLMikuY29udmVyZ2Uud29ya2VyLnYxLkNoaWxkU3BlYy5MYWJlbHNFbnRyeRIUCgxraW5kX3ZlcnNpb24YBSABKAUaLQoLTGFiZWxzRW50cnkSCwoDa2V5GAEgASgJEg0KBXZhbHVlGAIgASgJOgI4ASKUAQoHRGVwRWRnZRItCgRmcm9tGAEgASgLMh8uY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlUmVmEisKAnRvGAIgASgLMh8uY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlUmVmEi0KBnZhbHVlcxgDIAMoCzIdLmNvbnZlcmdlLndvcmtlci52MS5WYWx1ZUZsb3ciaAoSUHJvdmlkZXJDb25maWdTcGVjEgwKBG5hbWUYASABKAkSDAoEa2luZBgCIAEoCRISCgppc19kZWZhdWx0GAMgASgIEgwKBHNwZWMYBCABKAwSFAoMa2luZF92ZXJzaW9uGAUgASgFImUKCU9wZXJhdGlvbhITCgtyZXNvdXJjZV9pZBgBIAEoDBIMCgR2ZXJiGAIgASgJEg0KBWlucHV0GAMgASgMEhAKCGF0dGVtcHRzGAQgASgFEhQKDHJlcXVlc3RlZF9ieRgFIAEoCSKBAgoOQ29tcG9zZVJlcXVlc3QSKgoEcm9vdBgBIAEoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIuCghvYnNlcnZlZBgCIAMoCzIcLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZRIuCgdkZXNpcmVkGAMgAygLMh0uY29udmVyZ2Uud29ya2VyLnYxLkNoaWxkU3BlYxIqCgVlZGdlcxgEIAMoCzIbLmNvbnZlcmdlLndvcmtlci52MS5EZXBFZGdlEjcKB2NvbmZpZ3MYBSADKAsyJi5jb252ZXJnZS53b3JrZXIudjEuUHJvdmlkZXJDb25maWdTcGVjIk0KC1dvcmtSZXF1ZXN0Ei4KCHJlc291cmNlGAEgASgLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEg4KBnN0YXR1cxgCIAEoDCLQAQoNUm9sbHVwUmVxdWVzdBIqCgRyb290GAEgASgLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEjEKC2Rlc2NlbmRhbnRzGAIgAygLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEg4KBnN0YXR1cxgDIAEoDBIyCgdzdW1tYXJ5GAQgASgLMiEuY29udmVyZ2Uud29ya2VyLnYxLlJvbGx1cFN1bW1hcnkSHAoUZGVzY2VuZGFudHNfaW5jbHVkZWQYBSABKAgikwMKDVJvbGx1cFN1bW1hcnkSDQoFdG90YWwYASABKAMSQAoIYnlfcGhhc2UYAiADKAsyLi5jb252ZXJnZS53b3JrZXIudjEuUm9sbHVwU3VtbWFyeS5CeVBoYXNlRW50cnkSPgoHYnlfa2luZBgDIAMoCzItLmNvbnZlcmdlLndvcmtlci52MS5Sb2xsdXBTdW1tYXJ5LkJ5S2luZEVudHJ5Ei8KBmZhaWxlZBgEIAMoCzIfLmNvbnZlcmdlLndvcmtlci52MS5SZXNvdXJjZVJlZhIyCglub3RfcmVhZHkYBSADKAsyHy5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2VSZWYSFAoMZmFpbGVkX3RvdGFsGAYgASgDEhcKD25vdF9yZWFkeV90b3RhbBgHIAEoAxouCgxCeVBoYXNlRW50cnkSCwoDa2V5GAEgASgJEg0KBXZhbHVlGAIgASgDOgI4ARotCgtCeUtpbmRFbnRyeRILCgNrZXkYASABKAkSDQoFdmFsdWUYAiABKAM6AjgBIn4KFkxpc3REZXNjZW5kYW50c1JlcXVlc3QSEwoLcmVzb3VyY2VfaWQYASABKAwSEwoLbGVhc2VfdG9rZW4YAiABKAkSEwoLY2xhaW1fZXBvY2gYAyABKAMSEgoKcGFnZV90b2tlbhgEIAEoDBIRCglwYWdlX3NpemUYBSABKA0iZQoXTGlzdERlc2NlbmRhbnRzUmVzcG9uc2USMQoLZGVzY2VuZGFudHMYASADKAsyHC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2USFwoPbmV4dF9wYWdlX3Rva2VuGAIgASgMIj8KDURlbGV0ZVJlcXVlc3QSLgoIcmVzb3VyY2UYASABKAsyHC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2UicgoOT3BlcmF0ZVJlcXVlc3QSLgoIcmVzb3VyY2UYASABKAsyHC5jb252ZXJnZS53b3JrZXIudjEuUmVzb3VyY2USMAoJb3BlcmF0aW9uGAIgASgLMh0uY29udmVyZ2Uud29ya2VyLnYxLk9wZXJhdGlvbiKHAQoMUmVhY3RSZXF1ZXN0Ei4KCHJlc291cmNlGAEgASgLMhwuY29udmVyZ2Uud29ya2VyLnYxLlJlc291cmNlEjIKCnRyYW5zaXRpb24YAiABKA4yHi5jb252ZXJnZS53b3JrZXIudjEuVHJhbnNpdGlvbhITCgtkZWR1cF90b2tlbhgDIAEoCSJKCglDb25kaXRpb24SDAoEdHlwZRgBIAEoCRIOCgZzdGF0dXMYAiABKAkSDgoGcmVhc29uGAMgASgJEg8KB21lc3NhZ2UYBCABKAki5wEKDUNvbXBvc2VSZXN1bHQSLgoHZGVzaXJlZBgBIAMoCzIdLmNvbnZlcmdlLndvcmtlci52MS5DaGlsZFNwZWMSKgoFZWRnZXMYAiADKAsyGy5jb252ZXJnZS53b3JrZXIudjEuRGVwRWRnZRI3Cgdjb25maWdzGAMgAygLMiYuY29udmVyZ2Uud29ya2VyLnYxLlByb3ZpZGVyQ29uZmlnU3BlYxIOCgZzdGF0dXMYBCABKAwSMQoKY29uZGl0aW9ucxgFIAMoCzIdLmNvbnZlcmdlLndvcmtlci52MS5Db25kaXRpb24iqQIKDVN0YWdlQ29tcGxldGUSEwoLbGVhc2VfdG9rZW4YASABKAkSKAoFc3RhZ2UYAiABKA4yGS5jb252ZXJnZS53b3JrZXIudjEuU3RhZ2USDgoGc3RhdHVzGAMgASgMEjEKCmNvbmRpdGlvbnMYBCADKAsyHS5jb252ZXJnZS53b3JrZXIudjEuQ29uZGl0aW9uEjIKB2NvbXBvc2UYBSABKAsyIS5jb252ZXJnZS53b3JrZXIudjEuQ29tcG9zZVJlc3VsdBIOCgZvdXRwdXQYBiABKAwSFQoNZXJyb3JfbWVzc2FnZRgHIAEoCRIUCgxmYWlsZWRfc3RhZ2UYCCABKAUSEAoIdGVybWluYWwYCSABKAgSEwoLY2xhaW1fZXBvY2gYCiABKAMiSQoLQ29tcGxldGVBY2sSEwoLbGVhc2VfdG9rZW4YASABKAkSEwoLY2xhaW1fZXBvY2gYAiABKAMSEAoIYWNjZXB0ZWQYAyABKAgiRgoKQ2FuY2VsVGFzaxITCgtsZWFzZV90b2tlbhgBIAEoCRITCgtjbGFpbV9lcG9jaBgCIAEoAxIOCgZyZWFzb24YAyABKAkiLAoFRHJhaW4SDgoGcmVhc29uGAEgASgJEhMKC2RlYWRsaW5lX21zGAIgASgDIkAKGEdldFByb3ZpZGVyQ29uZmlnUmVxdWVzdBINCgVraW5kcxgBIAMoCRIVCg1raW5kX3ZlcnNpb25zGAIgAygFIlUKGUdldFByb3ZpZGVyQ29uZmlnUmVzcG9uc2USOAoHZW50cmllcxgBIAMoCzInLmNvbnZlcmdlLndvcmtlci52MS5Qcm92aWRlckNvbmZpZ0VudHJ5IlkKE1Byb3ZpZGVyQ29uZmlnRW50cnkSDAoEa2luZBgBIAEoCRIUCgxraW5kX3ZlcnNpb24YAiABKAUSDgoGY29uZmlnGAMgASgMEg4KBmJ1bmRsZRgEIAEoDCqJAQoFU3RhZ2USFQoRU1RBR0VfVU5TUEVDSUZJRUQQABIRCg1TVEFHRV9DT01QT1NFEAESDgoKU1RBR0VfV09SSxACEhAKDFNUQUdFX1JPTExVUBADEhAKDFNUQUdFX0RFTEVURRAEEhEKDVNUQUdFX09QRVJBVEUQBRIPCgtTVEFHRV9SRUFDVBAGKp8BCgpUcmFuc2l0aW9uEhoKFlRSQU5TSVRJT05fVU5TUEVDSUZJRUQQABIWChJUUkFOU0lUSU9OX0NSRUFURUQQARIVChFUUkFOU0lUSU9OX1NZTkNFRBACEhcKE1RSQU5TSVRJT05fREVHUkFERUQQAxIVChFUUkFOU0lUSU9OX0ZBSUxFRBAEEhYKElRSQU5TSVRJT05fREVMRVRFRBAFMtECCg1Xb3JrZXJTZXJ2aWNlEmIKCldvcmtTdHJlYW0SJy5jb252ZXJnZS53b3JrZXIudjEuV29ya1N0cmVhbUNsaWVudE1zZxonLmNvbnZlcmdlLndvcmtlci52MS5Xb3JrU3RyZWFtU2VydmVyTXNnKAEwARJwChFHZXRQcm92aWRlckNvbmZpZxIsLmNvbnZlcmdlLndvcmtlci52MS5HZXRQcm92aWRlckNvbmZpZ1JlcXVlc3QaLS5jb252ZXJnZS53b3JrZXIudjEuR2V0UHJvdmlkZXJDb25maWdSZXNwb25zZRJqCg9MaXN0RGVzY2VuZGFudHMSKi5jb252ZXJnZS53b3JrZXIudjEuTGlzdERlc2NlbmRhbnRzUmVxdWVzdBorLmNvbnZlcmdlLndvcmtlci52MS5MaXN0RGVzY2VuZGFudHNSZXNwb25zZUInWiVjb252ZXJnZS5kZXYvc2RrLWdvL3dvcmtlcnBiO3dvcmtlcnBiYgZwcm90bzM");
/**
 * Describes the message converge.worker.v1.WorkStreamClientMsg.
 * Use `create(WorkStreamClientMsgSchema)` to create a new message.
 */
export const WorkStreamClientMsgSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 0);
/**
 * Describes the message converge.worker.v1.WorkStreamServerMsg.
 * Use `create(WorkStreamServerMsgSchema)` to create a new message.
 */
export const WorkStreamServerMsgSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 1);
/**
 * Describes the message converge.worker.v1.Subscribe.
 * Use `create(SubscribeSchema)` to create a new message.
 */
export const SubscribeSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 2);
/**
 * Describes the message converge.worker.v1.ResumedTask.
 * Use `create(ResumedTaskSchema)` to create a new message.
 */
export const ResumedTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 3);
/**
 * Describes the message converge.worker.v1.WorkHeartbeat.
 * Use `create(WorkHeartbeatSchema)` to create a new message.
 */
export const WorkHeartbeatSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 4);
/**
 * Describes the message converge.worker.v1.Interest.
 * Use `create(InterestSchema)` to create a new message.
 */
export const InterestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 5);
/**
 * Describes the message converge.worker.v1.ProviderConfigUpdate.
 * Use `create(ProviderConfigUpdateSchema)` to create a new message.
 */
export const ProviderConfigUpdateSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 6);
/**
 * Describes the message converge.worker.v1.StageTask.
 * Use `create(StageTaskSchema)` to create a new message.
 */
export const StageTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 7);
/**
 * Describes the message converge.worker.v1.Resource.
 * Use `create(ResourceSchema)` to create a new message.
 */
export const ResourceSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 8);
/**
 * Describes the message converge.worker.v1.ResourceRef.
 * Use `create(ResourceRefSchema)` to create a new message.
 */
export const ResourceRefSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 9);
/**
 * Describes the message converge.worker.v1.ValueFlow.
 * Use `create(ValueFlowSchema)` to create a new message.
 */
export const ValueFlowSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 10);
/**
 * Describes the message converge.worker.v1.ChildSpec.
 * Use `create(ChildSpecSchema)` to create a new message.
 */
export const ChildSpecSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 11);
/**
 * Describes the message converge.worker.v1.DepEdge.
 * Use `create(DepEdgeSchema)` to create a new message.
 */
export const DepEdgeSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 12);
/**
 * Describes the message converge.worker.v1.ProviderConfigSpec.
 * Use `create(ProviderConfigSpecSchema)` to create a new message.
 */
export const ProviderConfigSpecSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 13);
/**
 * Describes the message converge.worker.v1.Operation.
 * Use `create(OperationSchema)` to create a new message.
 */
export const OperationSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 14);
/**
 * Describes the message converge.worker.v1.ComposeRequest.
 * Use `create(ComposeRequestSchema)` to create a new message.
 */
export const ComposeRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 15);
/**
 * Describes the message converge.worker.v1.WorkRequest.
 * Use `create(WorkRequestSchema)` to create a new message.
 */
export const WorkRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 16);
/**
 * Describes the message converge.worker.v1.RollupRequest.
 * Use `create(RollupRequestSchema)` to create a new message.
 */
export const RollupRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 17);
/**
 * Describes the message converge.worker.v1.RollupSummary.
 * Use `create(RollupSummarySchema)` to create a new message.
 */
export const RollupSummarySchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 18);
/**
 * Describes the message converge.worker.v1.ListDescendantsRequest.
 * Use `create(ListDescendantsRequestSchema)` to create a new message.
 */
export const ListDescendantsRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 19);
/**
 * Describes the message converge.worker.v1.ListDescendantsResponse.
 * Use `create(ListDescendantsResponseSchema)` to create a new message.
 */
export const ListDescendantsResponseSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 20);
/**
 * Describes the message converge.worker.v1.DeleteRequest.
 * Use `create(DeleteRequestSchema)` to create a new message.
 */
export const DeleteRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 21);
/**
 * Describes the message converge.worker.v1.OperateRequest.
 * Use `create(OperateRequestSchema)` to create a new message.
 */
export const OperateRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 22);
/**
 * Describes the message converge.worker.v1.ReactRequest.
 * Use `create(ReactRequestSchema)` to create a new message.
 */
export const ReactRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 23);
/**
 * Describes the message converge.worker.v1.Condition.
 * Use `create(ConditionSchema)` to create a new message.
 */
export const ConditionSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 24);
/**
 * Describes the message converge.worker.v1.ComposeResult.
 * Use `create(ComposeResultSchema)` to create a new message.
 */
export const ComposeResultSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 25);
/**
 * Describes the message converge.worker.v1.StageComplete.
 * Use `create(StageCompleteSchema)` to create a new message.
 */
export const StageCompleteSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 26);
/**
 * Describes the message converge.worker.v1.CompleteAck.
 * Use `create(CompleteAckSchema)` to create a new message.
 */
export const CompleteAckSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 27);
/**
 * Describes the message converge.worker.v1.CancelTask.
 * Use `create(CancelTaskSchema)` to create a new message.
 */
export const CancelTaskSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 28);
/**
 * Describes the message converge.worker.v1.Drain.
 * Use `create(DrainSchema)` to create a new message.
 */
export const DrainSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 29);
/**
 * Describes the message converge.worker.v1.GetProviderConfigRequest.
 * Use `create(GetProviderConfigRequestSchema)` to create a new message.
 */
export const GetProviderConfigRequestSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 30);
/**
 * Describes the message converge.worker.v1.GetProviderConfigResponse.
 * Use `create(GetProviderConfigResponseSchema)` to create a new message.
 */
export const GetProviderConfigResponseSchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 31);
/**
 * Describes the message converge.worker.v1.ProviderConfigEntry.
 * Use `create(ProviderConfigEntrySchema)` to create a new message.
 */
export const ProviderConfigEntrySchema = /*@__PURE__*/ messageDesc(file_converge_worker_v1_worker, 32);
/**
 * Stage names the step of the reconcile pipeline a task asks the worker to run.
 *
 * @generated from enum converge.worker.v1.Stage
 */
export var Stage;
(function (Stage) {
    /**
     * Never sent; a task with this stage is malformed.
     *
     * @generated from enum value: STAGE_UNSPECIFIED = 0;
     */
    Stage[Stage["UNSPECIFIED"] = 0] = "UNSPECIFIED";
    /**
     * Produce desired children, dependency edges and configs for a composite resource.
     *
     * @generated from enum value: STAGE_COMPOSE = 1;
     */
    Stage[Stage["COMPOSE"] = 1] = "COMPOSE";
    /**
     * Reconcile a resource against the outside world and report observed status.
     *
     * @generated from enum value: STAGE_WORK = 2;
     */
    Stage[Stage["WORK"] = 2] = "WORK";
    /**
     * Aggregate the status of a composite once its descendants have settled.
     *
     * @generated from enum value: STAGE_ROLLUP = 3;
     */
    Stage[Stage["ROLLUP"] = 3] = "ROLLUP";
    /**
     * Tear down what a finalizer guards before the resource row is removed.
     *
     * @generated from enum value: STAGE_DELETE = 4;
     */
    Stage[Stage["DELETE"] = 4] = "DELETE";
    /**
     * Run an operator verb (an imperative operation) against a resource.
     *
     * @generated from enum value: STAGE_OPERATE = 5;
     */
    Stage[Stage["OPERATE"] = 5] = "OPERATE";
    /**
     * Run a reactor's side effect for a lifecycle transition of a watched resource.
     *
     * @generated from enum value: STAGE_REACT = 6;
     */
    Stage[Stage["REACT"] = 6] = "REACT";
})(Stage || (Stage = {}));
/**
 * Describes the enum converge.worker.v1.Stage.
 */
export const StageSchema = /*@__PURE__*/ enumDesc(file_converge_worker_v1_worker, 0);
/**
 * Transition is the closed set of lifecycle edges a reactor binding can subscribe to.
 *
 * @generated from enum converge.worker.v1.Transition
 */
export var Transition;
(function (Transition) {
    /**
     * Never sent for a reactor task.
     *
     * @generated from enum value: TRANSITION_UNSPECIFIED = 0;
     */
    Transition[Transition["UNSPECIFIED"] = 0] = "UNSPECIFIED";
    /**
     * The resource was created.
     *
     * @generated from enum value: TRANSITION_CREATED = 1;
     */
    Transition[Transition["CREATED"] = 1] = "CREATED";
    /**
     * The resource reached synced_gen >= generation.
     *
     * @generated from enum value: TRANSITION_SYNCED = 2;
     */
    Transition[Transition["SYNCED"] = 2] = "SYNCED";
    /**
     * The resource became synced but unhealthy.
     *
     * @generated from enum value: TRANSITION_DEGRADED = 3;
     */
    Transition[Transition["DEGRADED"] = 3] = "DEGRADED";
    /**
     * The resource's reconcile failed for its live spec.
     *
     * @generated from enum value: TRANSITION_FAILED = 4;
     */
    Transition[Transition["FAILED"] = 4] = "FAILED";
    /**
     * The resource was deleted.
     *
     * @generated from enum value: TRANSITION_DELETED = 5;
     */
    Transition[Transition["DELETED"] = 5] = "DELETED";
})(Transition || (Transition = {}));
/**
 * Describes the enum converge.worker.v1.Transition.
 */
export const TransitionSchema = /*@__PURE__*/ enumDesc(file_converge_worker_v1_worker, 1);
/**
 * WorkerService is served by every broker. A worker dials in, subscribes to the kinds it
 * serves, and receives tasks on one bidirectional stream.
 *
 * @generated from service converge.worker.v1.WorkerService
 */
export const WorkerService = /*@__PURE__*/ serviceDesc(file_converge_worker_v1_worker, 0);
//# sourceMappingURL=worker_pb.js.map