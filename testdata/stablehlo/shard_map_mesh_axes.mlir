"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=4]>, sym_name = "mesh"}> {stablehlo.mesh = {axes = [{name = "x", size = 4 : i64}]}} : () -> ()
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=2, "y"=2]>, sym_name = "mesh_0"}> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 2 : i64}]}} : () -> ()
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=4]>, sym_name = "mesh_1"}> {stablehlo.mesh = {axes = [{name = "x", size = 4 : i64}]}} : () -> ()
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=2, "y"=2]>, sym_name = "mesh_2"}> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 2 : i64}]}} : () -> ()
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<2xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<8x8xf32>, %arg1: tensor<8xf32>):
    %0:2 = "sdy.manual_computation"(%arg0, %arg1) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, [{"x"}]>]>, manual_axes = #sdy<manual_axes{"x"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{}, {}]>, <@mesh, [{}]>]>}> ({
    ^bb0(%arg9: tensor<2x8xf32>, %arg10: tensor<2xf32>):
      %12 = "stablehlo.transpose"(%arg9) <{permutation = array<i64: 1, 0>}> : (tensor<2x8xf32>) -> tensor<8x2xf32>
      %13 = "stablehlo.dot_general"(%arg9, %12) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
      %14 = "stablehlo.all_reduce"(%13) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh_1, axes = [#stablehlo.axis_ref<name = "x">]>, use_global_device_ids}> ({
      ^bb0(%arg13: tensor<f32>, %arg14: tensor<f32>):
        %17 = "stablehlo.add"(%arg13, %arg14) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%17) : (tensor<f32>) -> ()
      }) : (tensor<2x2xf32>) -> tensor<2x2xf32>
      %15 = "stablehlo.all_reduce"(%arg10) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh_1, axes = [#stablehlo.axis_ref<name = "x">]>, use_global_device_ids}> ({
      ^bb0(%arg11: tensor<f32>, %arg12: tensor<f32>):
        %16 = "stablehlo.maximum"(%arg11, %arg12) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%16) : (tensor<f32>) -> ()
      }) : (tensor<2xf32>) -> tensor<2xf32>
      "sdy.return"(%14, %15) : (tensor<2x2xf32>, tensor<2xf32>) -> ()
    }) : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<2x2xf32>, tensor<2xf32>)
    %1 = "sdy.manual_computation"(%arg0) <{in_shardings = #sdy.sharding_per_value<[<@mesh_0, [{"x"}, {"y"}]>]>, manual_axes = #sdy<manual_axes{"x", "y"}>, out_shardings = #sdy.sharding_per_value<[<@mesh_0, [{"x"}, {}]>]>}> ({
    ^bb0(%arg6: tensor<4x4xf32>):
      %9 = "stablehlo.tanh"(%arg6) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %10 = "stablehlo.all_reduce"(%9) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh_2, axes = [#stablehlo.axis_ref<name = "y">]>, use_global_device_ids}> ({
      ^bb0(%arg7: tensor<f32>, %arg8: tensor<f32>):
        %11 = "stablehlo.add"(%arg7, %arg8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%11) : (tensor<f32>) -> ()
      }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      "sdy.return"(%10) : (tensor<4x4xf32>) -> ()
    }) : (tensor<8x8xf32>) -> tensor<8x4xf32>
    %2 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %3 = "stablehlo.reduce"(%0#0, %2) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %8 = "stablehlo.add"(%arg4, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%8) : (tensor<f32>) -> ()
    }) : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
    %4 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %5 = "stablehlo.reduce"(%1, %4) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %7 = "stablehlo.add"(%arg2, %arg3) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%7) : (tensor<f32>) -> ()
    }) : (tensor<8x4xf32>, tensor<f32>) -> tensor<f32>
    %6 = "stablehlo.add"(%3, %5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "func.return"(%6, %0#1) : (tensor<f32>, tensor<2xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
