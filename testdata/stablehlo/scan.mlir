"builtin.module"() <{sym_name = "jit_scan"}> ({
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<16x16xf32>, tensor<6x4x16xf32>) -> tensor<6x4x16xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg8: tensor<16x16xf32>, %arg9: tensor<6x4x16xf32>):
    %11 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %12 = "stablehlo.broadcast_in_dim"(%11) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x16xf32>
    %13 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %14 = "stablehlo.broadcast_in_dim"(%13) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<6x4x16xf32>
    %15 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %16:5 = "stablehlo.while"(%arg9, %arg8, %15, %12, %14) ({
    ^bb0(%arg15: tensor<6x4x16xf32>, %arg16: tensor<16x16xf32>, %arg17: tensor<i32>, %arg18: tensor<4x16xf32>, %arg19: tensor<6x4x16xf32>):
      %22 = "stablehlo.constant"() <{value = dense<6> : tensor<i32>}> : () -> tensor<i32>
      %23 = "stablehlo.compare"(%arg17, %22) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%23) : (tensor<i1>) -> ()
    }, {
    ^bb0(%arg10: tensor<6x4x16xf32>, %arg11: tensor<16x16xf32>, %arg12: tensor<i32>, %arg13: tensor<4x16xf32>, %arg14: tensor<6x4x16xf32>):
      %17 = "func.call"(%arg10, %arg12) <{callee = @dynamic_index_in_dim}> : (tensor<6x4x16xf32>, tensor<i32>) -> tensor<4x16xf32>
      %18:2 = "func.call"(%arg11, %arg13, %17) <{callee = @closed_call}> : (tensor<16x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
      %19 = "func.call"(%arg14, %18#1, %arg12) <{callee = @dynamic_update_index_in_dim}> : (tensor<6x4x16xf32>, tensor<4x16xf32>, tensor<i32>) -> tensor<6x4x16xf32>
      %20 = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
      %21 = "stablehlo.add"(%arg12, %20) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      "stablehlo.return"(%arg10, %arg11, %21, %18#0, %19) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<i32>, tensor<4x16xf32>, tensor<6x4x16xf32>) -> ()
    }) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<i32>, tensor<4x16xf32>, tensor<6x4x16xf32>) -> (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<i32>, tensor<4x16xf32>, tensor<6x4x16xf32>)
    "func.return"(%16#4) : (tensor<6x4x16xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<6x4x16xf32>, tensor<i32>) -> tensor<4x16xf32>, res_attrs = [{}], sym_name = "dynamic_index_in_dim", sym_visibility = "private"}> ({
  ^bb0(%arg6: tensor<6x4x16xf32>, %arg7: tensor<i32>):
    %7 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %8 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %9 = "stablehlo.dynamic_slice"(%arg6, %arg7, %7, %8) <{slice_sizes = array<i64: 1, 4, 16>}> : (tensor<6x4x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x16xf32>
    %10 = "stablehlo.reshape"(%9) : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
    "func.return"(%10) : (tensor<4x16xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<16x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>), res_attrs = [{}, {}], sym_name = "closed_call", sym_visibility = "private"}> ({
  ^bb0(%arg3: tensor<16x16xf32>, %arg4: tensor<4x16xf32>, %arg5: tensor<4x16xf32>):
    %4 = "stablehlo.dot_general"(%arg5, %arg3) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    %5 = "stablehlo.add"(%4, %arg4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %6 = "stablehlo.tanh"(%5) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    "func.return"(%6, %6) : (tensor<4x16xf32>, tensor<4x16xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}, {}], function_type = (tensor<6x4x16xf32>, tensor<4x16xf32>, tensor<i32>) -> tensor<6x4x16xf32>, res_attrs = [{}], sym_name = "dynamic_update_index_in_dim", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<6x4x16xf32>, %arg1: tensor<4x16xf32>, %arg2: tensor<i32>):
    %0 = "stablehlo.broadcast_in_dim"(%arg1) <{broadcast_dimensions = array<i64: 1, 2>}> : (tensor<4x16xf32>) -> tensor<1x4x16xf32>
    %1 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %2 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %3 = "stablehlo.dynamic_update_slice"(%arg0, %0, %arg2, %1, %2) : (tensor<6x4x16xf32>, tensor<1x4x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<6x4x16xf32>
    "func.return"(%3) : (tensor<6x4x16xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
