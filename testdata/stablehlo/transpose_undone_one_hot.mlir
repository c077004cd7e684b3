"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}, {}, {}], function_type = (tensor<8x32xf32>, tensor<32x16xf32>, tensor<2x4xi32>) -> tensor<8x16xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg1: tensor<8x32xf32>, %arg2: tensor<32x16xf32>, %arg3: tensor<2x4xi32>):
    %6 = "stablehlo.transpose"(%arg1) <{permutation = array<i64: 1, 0>}> : (tensor<8x32xf32>) -> tensor<32x8xf32>
    %7 = "stablehlo.transpose"(%6) <{permutation = array<i64: 1, 0>}> : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %8 = "stablehlo.dot_general"(%7, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
    %9 = "func.call"(%arg3) <{callee = @_one_hot}> : (tensor<2x4xi32>) -> tensor<2x4x16xf32>
    %10 = "stablehlo.reshape"(%9) : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
    %11 = "stablehlo.add"(%8, %10) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%11) : (tensor<8x16xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<2x4xi32>) -> tensor<2x4x16xf32>, res_attrs = [{}], sym_name = "_one_hot", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<2x4xi32>):
    %0 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<2x4xi32>) -> tensor<2x4x1xi32>
    %1 = "stablehlo.iota"() <{iota_dimension = 2 : i64}> : () -> tensor<1x1x16xi32>
    %2 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<2x4x1xi32>) -> tensor<2x4x16xi32>
    %3 = "stablehlo.broadcast_in_dim"(%1) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x16xi32>) -> tensor<2x4x16xi32>
    %4 = "stablehlo.compare"(%2, %3) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction EQ>}> : (tensor<2x4x16xi32>, tensor<2x4x16xi32>) -> tensor<2x4x16xi1>
    %5 = "stablehlo.convert"(%4) : (tensor<2x4x16xi1>) -> tensor<2x4x16xf32>
    "func.return"(%5) : (tensor<2x4x16xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
